// The metadata section (metadata_rtt.h): raw probes in this process, each client's calls in a
// forked child of its own.
#include "bench/store/metadata_rtt.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/ping_pong_probe.h"
#include "bench/common/stats.h"
#include "bench/store/metadata_calls.h"
#include "store/client/dummy_client.h"
#include "store/client/master_client.h"
#include "store/node/embedded_client.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr auto kChildLimit = std::chrono::minutes(3);
constexpr uint32_t kRawWarmup = 200;
constexpr auto kMasterTimeout = std::chrono::milliseconds(5000);

// kMetadataBatchKeys values from the client's mem pool (registered: the dummy's zero-copy path),
// each with bytes of its own.
Result<uint8_t*> Values(store::StoreClient& client, uint64_t value_bytes) {
  const uint64_t bytes = (kMetadataBatchKeys * value_bytes + 4095) / 4096 * 4096;
  auto p = client.AllocFromMemPool(bytes);
  if (!p.ok()) return p.status();
  if (auto st = client.RegisterBuffer(*p, bytes); !st.ok()) return st;
  auto* values = static_cast<uint8_t*>(*p);
  for (uint64_t i = 0; i < bytes; ++i) values[i] = static_cast<uint8_t>(i * 131 + i / value_bytes);
  return values;
}

json ClientCalls(const MetadataPlan& plan, const std::string& name, store::StoreClient& client,
                 store::MasterApi* master) {
  auto values = Values(client, plan.value_bytes);
  if (!values.ok()) return {{"error", "mem pool: " + values.status().ToString()}};
  json out = RunMetadataCalls({name, plan.calls, plan.warmup_calls, plan.value_bytes}, client,
                              *values, master);
  (void)client.Close();
  return out;
}

// The children's bodies: each connects its client and runs the calls.
json DummyClientChild(const MetadataPlan& plan) {
  store::DummyOptions o;
  o.server_address = plan.node_address;
  o.mem_pool_size = 1ULL << 20;
  o.local_buffer_size = 0;  // Put/Get (the copying calls) are not used
  auto client = store::ConnectDummy(o);
  if (!client.ok()) return {{"error", "connect: " + client.status().ToString()}};
  return ClientCalls(plan, "dummy", **client, nullptr);
}

json EmbeddedChild(const MetadataPlan& plan) {
  store::EmbeddedOptions o;
  o.node.master = plan.master_address;
  o.node.host = "127.0.0.1";
  o.node.port = 0;
  o.node.segment_size = plan.embedded_segment_bytes;
  auto client = store::StartEmbedded(o);
  if (!client.ok()) return {{"error", "start: " + client.status().ToString()}};
  // A client of the master of its own, the kind the embedded node uses inside, for put-start and
  // put-end alone.
  std::unique_ptr<store::MasterApi> master =
      store::ConnectMaster({plan.master_address, kMasterTimeout});
  return ClientCalls(plan, "embedded", **client, master.get());
}

void RunChild(const std::function<json()>& body, const std::string& name, MetadataSection& out) {
  auto [reply, code] = RunJsonChild(body, kChildLimit);
  if (!reply.ok()) {
    out.errors.push_back(fmt::format("{}: {}", name, reply.status().ToString()));
    return;
  }
  if (reply->contains("error")) {
    out.errors.push_back(fmt::format("{}: {}", name, (*reply)["error"].get<std::string>()));
    return;
  }
  if (code != 0) out.errors.push_back(fmt::format("{} process exited with code {}", name, code));
  for (const json& r : (*reply)["rows"]) {
    LatencyRow row;
    row.client = r["client"].get<std::string>();
    row.op = r["op"].get<std::string>();
    row.keys = r["keys"].get<uint32_t>();
    row.us.count = r["calls"].get<size_t>();
    row.us.p50 = r["p50_us"].get<double>();
    row.us.p99 = r["p99_us"].get<double>();
    row.us.mean = r["mean_us"].get<double>();
    row.us.max = r["max_us"].get<double>();
    out.rows.push_back(std::move(row));
  }
  out.checked_answers += (*reply)["checked_answers"].get<uint64_t>();
  out.wrong_answers += (*reply)["wrong_answers"].get<uint64_t>();
  for (const auto& e : (*reply)["errors"]) {
    AddError(out.errors, fmt::format("{}: {}", name, e.get<std::string>()));
  }
}

// One run of both raw probes; the round trips are added to `samples` by socket name.
void ProbeRaw(const MetadataPlan& plan, std::map<std::string, std::vector<double>>& samples,
              MetadataSection& out) {
  for (PingPongSocket kind : {PingPongSocket::kLoopbackTcp, PingPongSocket::kUnixStream}) {
    const std::string name = PingPongSocketName(kind);
    auto us = MeasurePingPong(kind, plan.value_bytes, plan.raw_round_trips, kRawWarmup);
    if (!us.ok()) {
      out.errors.push_back(fmt::format("raw {} ping-pong: {}", name, us.status().ToString()));
      continue;
    }
    out.raw_run_p50_us[name].push_back(DistributionOf(*us).p50);
    samples[name].insert(samples[name].end(), us->begin(), us->end());
  }
}

}  // namespace

MetadataSection MeasureMetadata(const MetadataPlan& plan,
                                const std::function<void(const std::string&)>& progress) {
  MetadataSection out;
  out.calls = plan.calls;
  out.warmup_calls = plan.warmup_calls;
  out.value_bytes = plan.value_bytes;
  out.raw_round_trips = plan.raw_round_trips;
  std::map<std::string, std::vector<double>> raw;
  progress("metadata: raw TCP and Unix socket round trips");
  ProbeRaw(plan, raw, out);
  progress("metadata: dummy client calls");
  RunChild([&plan] { return DummyClientChild(plan); }, "dummy", out);
  progress("metadata: embedded client calls");
  RunChild([&plan] { return EmbeddedChild(plan); }, "embedded", out);
  progress("metadata: raw round trips again");
  ProbeRaw(plan, raw, out);
  for (auto& [name, us] : raw) out.raw[name] = DistributionOf(std::move(us));
  return out;
}

}  // namespace kvtier::bench
