// "type":"resp": a Redis/Valkey server over TCP. Each connector thread owns one RespConnection
// (opened lazily, reopened after any failure, so a restarted server is picked up by itself), and
// every tile of a batch is one pipeline on it. Values move between the caller's buffers and the
// socket without an intermediate copy (resp_connection.cc). With "cluster": true each thread owns
// one connection per primary of a Redis Cluster instead, and a tile is split by slot owner
// (resp_cluster.h).
//
// Store is `SET key value NX` (with `EX ttl_s` when set): the first writer wins, and an existing
// key counts as stored with 0 bytes. Redis applies a command only once it has received all of it,
// so a connection dropped mid-value never leaves a partial value readable.
//
// Backend keys: host [127.0.0.1], port [6379], password, username, db [0],
// connect_timeout_ms [1000], ttl_s [none], cluster [false], nodes [none]
// (docs/connectors/resp.md).
#include <fmt/format.h>

#include "connectors/builtin_connectors.h"
#include "connectors/connector_base.h"
#include "connectors/resp_cluster.h"
#include "connectors/resp_connection.h"
#include "connectors/resp_listing.h"
#include "connectors/resp_slots.h"

namespace kvtier {
namespace {

// Lookups and removes carry no values: a tile of this many keys is still one short round trip, so
// smaller batches stay on one connection instead of waking several threads.
constexpr size_t kSmallOpKeysPerTile = 256;

// C is what one connector thread owns: RespConnection (one server) or RespClusterConn (one
// connection per primary); S is what every thread's C is made from: the server's endpoint, or the
// cluster's shared slot map. Both C have the same batch calls.
template <class C, class S>
class RespConnector final : public ConnectorBase<RespConnector<C, S>> {
 public:
  using Conn = C;

  RespConnector(const ConnectorOptions& options, S shared)
      : ConnectorBase<RespConnector>(options), shared_(std::move(shared)) {
    this->StartThreads();
  }
  ~RespConnector() override { this->Close(); }

  // Connects lazily (at the first call, bounded by its deadline), so this cannot fail.
  Result<std::unique_ptr<Conn>> Connect() { return std::make_unique<Conn>(shared_); }

  size_t TilesFor(ConnectorOp op, size_t keys, size_t threads) const {
    if (op == ConnectorOp::kLookup || op == ConnectorOp::kRemove) {
      return std::min(threads, (keys + kSmallOpKeysPerTile - 1) / kSmallOpKeysPerTile);
    }
    return std::min(keys, threads);
  }

  // The whole contract is pipelined batches; the base's per-key calls are not used.
  Status BatchGet(Conn& c, std::span<const std::string> keys, std::span<const MutableBuffer> dst,
                  Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
    return c.Get(keys, dst, d, out, bytes);
  }
  Status BatchSet(Conn& c, std::span<const std::string> keys, std::span<const ConstBuffer> src,
                  Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
    return c.Set(keys, src, d, out, bytes);
  }
  Status BatchExists(Conn& c, std::span<const std::string> keys, Deadline d,
                     std::span<uint8_t> out) {
    return c.Exists(keys, d, out);
  }
  Status BatchRemove(Conn& c, std::span<const std::string> keys, Deadline d,
                     std::span<uint8_t> out) {
    return c.Del(keys, d, out);
  }

  Result<std::vector<StoredObject>> ListStored() override {
    if constexpr (std::is_same_v<S, RespEndpoint>) {
      return ListRespObjects(shared_);
    } else {
      return ListRespClusterObjects(*shared_);
    }
  }

 private:
  const S shared_;
};

using RespServerConnector = RespConnector<RespConnection, RespEndpoint>;
using RespClusterConnector = RespConnector<RespClusterConn, std::shared_ptr<RespSlotCache>>;

Status BadValue(const std::string& key, const char* want) {
  return Status(Code::kInvalidArgument, fmt::format("resp: '{}' must be {}", key, want));
}

}  // namespace

ConnectorResult CreateRespConnector(const ConnectorOptions& options, const nlohmann::json& backend) {
  RespEndpoint ep;
  bool has_username = false;
  bool cluster = false, has_nodes = false;
  std::vector<RespShard> nodes;
  for (const auto& [key, v] : backend.items()) {
    if (key == "host") {
      if (!v.is_string() || v.get<std::string>().empty()) return BadValue(key, "a non-empty string");
      ep.host = v.get<std::string>();
    } else if (key == "port") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 65535) {
        return BadValue(key, "an integer in 1..65535");
      }
      ep.port = static_cast<uint16_t>(v.get<int64_t>());
    } else if (key == "password") {
      if (!v.is_string()) return BadValue(key, "a string");
      ep.password = v.get<std::string>();
    } else if (key == "username") {
      if (!v.is_string() || v.get<std::string>().empty()) return BadValue(key, "a non-empty string");
      ep.username = v.get<std::string>();
      has_username = true;
    } else if (key == "db") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return BadValue(key, "an integer >= 0");
      }
      ep.db = v.get<int64_t>();
    } else if (key == "connect_timeout_ms") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 3600000) {
        return BadValue(key, "an integer in 1..3600000");
      }
      ep.connect_timeout = std::chrono::milliseconds(v.get<int64_t>());
    } else if (key == "ttl_s") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > INT32_MAX) {
        return BadValue(key, "an integer of seconds >= 1");
      }
      ep.ttl_s = v.get<uint32_t>();
    } else if (key == "cluster") {
      if (!v.is_boolean()) return BadValue(key, "true or false");
      cluster = v.get<bool>();
    } else if (key == "nodes") {
      if (!v.is_array()) return BadValue(key, "an array of \"host:port\" strings");
      for (const auto& n : v) {
        std::optional<RespShard> node = n.is_string() ? ParseRespShard(n.get<std::string>())
                                                     : std::nullopt;
        if (!node || node->host.empty()) {
          return Status(Code::kInvalidArgument,
                        fmt::format("resp: 'nodes' entries must be \"host:port\" strings with a "
                                    "port in 1..65535, got {}",
                                    n.dump()));
        }
        nodes.push_back(std::move(*node));
      }
      has_nodes = true;
    } else {
      return Status(Code::kInvalidArgument, fmt::format("unknown key '{}' for type resp", key));
    }
  }
  if (has_username && ep.password.empty()) {
    return Status(Code::kInvalidArgument, "resp: 'username' needs 'password' (AUTH user pass)");
  }
  if (has_nodes && !cluster) {
    return Status(Code::kInvalidArgument, "resp: 'nodes' needs \"cluster\": true");
  }
  if (!cluster) {
    return std::unique_ptr<Connector>(std::make_unique<RespServerConnector>(options, std::move(ep)));
  }
  if (ep.db != 0) {
    return Status(Code::kInvalidArgument,
                  "resp: 'db' must be 0 with \"cluster\": true (a Redis Cluster has only db 0)");
  }
  auto cache = std::make_shared<RespSlotCache>(std::move(ep), std::move(nodes));
  return std::unique_ptr<Connector>(
      std::make_unique<RespClusterConnector>(options, std::move(cache)));
}

}  // namespace kvtier
