#include "store/node/node_server.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "common/admin_http.h"
#include "store/node/dummy_service.h"

namespace kvtier::store {
namespace {

nlohmann::json DummiesJson(const std::vector<DummySummary>& dummies) {
  nlohmann::json out = nlohmann::json::array();
  for (const DummySummary& d : dummies) {
    out.push_back({{"client_id", d.client_id},
                   {"pid", d.pid},
                   {"regions", d.regions},
                   {"region_bytes", d.region_bytes},
                   {"buffers", d.buffers},
                   {"staging_used_bytes", d.staging_used_bytes},
                   {"requests", d.requests},
                   {"put_bytes", d.put_bytes},
                   {"get_bytes", d.get_bytes},
                   {"connected_s", d.connected_s},
                   {"idle_s", d.idle_s}});
  }
  return out;
}

// A node option this server refuses.
Status BadOption(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

}  // namespace

Status NodeServerOptions::Validate() const {
  if (node.master.empty()) return BadOption("master: empty (host:port or etcd://...)");
  if (node.host.empty()) return BadOption("host: empty");
  if (node.heartbeat_interval.count() <= 0) return BadOption("heartbeat interval must be > 0");
  if (node.rpc_timeout.count() <= 0) return BadOption("rpc timeout must be > 0");
  if (node.copy_threads > 64) {
    return BadOption(fmt::format("copy threads: {} is over 64", node.copy_threads));
  }
  if (dummy_ttl.count() <= 0) return BadOption("dummy ttl must be > 0");
  if (http_port && *http_port != 0 && *http_port == node.port) {
    return BadOption(fmt::format("http port {} is the data-plane port", *http_port));
  }
  return Status::Ok();
}

struct NodeServer::Impl {
  Clock* clock;
  int64_t started_ns;
  std::string master;
  uint64_t segment_bytes;
  std::unique_ptr<StoreNode> node;
  std::unique_ptr<DummyService> dummies;
  std::unique_ptr<AdminHttp> http;  // last: stopped first, as it reads the others
};

Result<std::unique_ptr<NodeServer>> NodeServer::Start(const NodeServerOptions& options,
                                                      MetricsRegistry* metrics) {
  KVT_RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : Clock::Real();
  impl->started_ns = impl->clock->NowNs();
  impl->master = options.node.master;
  impl->segment_bytes = options.node.segment_size;
  auto node = StoreNode::Start(options.node, metrics);
  if (!node.ok()) return node.status();  // keeps the store's code (ILLEGAL_CLIENT, ...)
  impl->node = std::move(*node);
  impl->dummies = std::make_unique<DummyService>(
      *impl->node, DummyServiceOptions{impl->node->port(), options.dummy_ttl, options.clock},
      metrics);
  if (Status s = impl->dummies->Start(); !s.ok()) {
    return Status(s.code(), "dummy socket: " + s.message());
  }
  std::unique_ptr<NodeServer> server(new NodeServer(std::move(impl)));
  if (options.http_port) {
    NodeServer* self = server.get();
    server->impl_->http =
        std::make_unique<AdminHttp>([self] { return self->StatusJson(); }, metrics);
    server->impl_->http->RequireToken(options.node.auth_token);
    KVT_RETURN_IF_ERROR(server->impl_->http->Start(options.node.host, *options.http_port));
  }
  return server;
}

NodeServer::NodeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NodeServer::~NodeServer() {
  if (impl_->http) impl_->http->Stop();
  if (impl_->dummies) impl_->dummies->Stop();
  impl_->node.reset();  // unmounts the segment
}

StoreNode& NodeServer::node() { return *impl_->node; }
uint16_t NodeServer::port() const { return impl_->node->port(); }

std::optional<uint16_t> NodeServer::http_port() const {
  if (!impl_->http) return std::nullopt;
  return impl_->http->Port();
}

nlohmann::json NodeServer::StatusJson() const {
  const double up_s = static_cast<double>(impl_->clock->NowNs() - impl_->started_ns) / 1e9;
  return nlohmann::json{{"version", KVTIER_VERSION},
                        {"uptime_s", up_s},
                        {"id", impl_->node->info().id},
                        {"endpoint", impl_->node->info().endpoint},
                        {"master", impl_->master},
                        {"mounted", impl_->node->mounted()},
                        {"segment_bytes", impl_->segment_bytes},
                        {"dummies_connected", impl_->dummies->connected()},
                        {"dummies", DummiesJson(impl_->dummies->Dummies())}};
}

}  // namespace kvtier::store
