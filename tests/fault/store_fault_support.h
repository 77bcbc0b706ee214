// What the store's fault tests share: dummies of a real node, puts of checksummed values, and
// reads that sort every answer into intact / not found / error / corrupt, so a test can state
// which outcomes a fault allows and no read's bytes go unchecked.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "fault/checksummed_value.h"
#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"

namespace kvtier::fault {

using store::ErrorCode;
using store::ErrorCodeOf;
using store::PutConfig;
using store::StoreClient;
// What every store fault test names (each used to spell these out itself).
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using testing::ChildProcess;
using testing::HttpJson;
using testing::MasterProcess;
using testing::NodeProcess;
using testing::WaitFor;

// The flags that make a `kvtier master` one of the candidates of `cluster` on this etcd, with the
// shortest lease (2 s), so a takeover comes quickly.
inline std::vector<std::string> FailoverFlags(const std::string& etcd_endpoint,
                                              const std::string& cluster) {
  return {"--etcd-endpoints", etcd_endpoint, "--cluster-id", cluster, "--etcd-lease-ttl-s", "2"};
}

// A second candidate, started after the leader: a standby whose RPC port listens once it leads.
inline std::vector<std::string> StandbyMasterArgs(const std::vector<std::string>& failover_flags,
                                                  uint16_t port, uint16_t http_port,
                                                  const std::string& log_level) {
  std::vector<std::string> args = {testing::KvtierBin(),
                                   "master",
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(port),
                                   "--http-port",
                                   std::to_string(http_port),
                                   "--log-level",
                                   log_level};
  args.insert(args.end(), failover_flags.begin(), failover_flags.end());
  return args;
}

inline std::unique_ptr<StoreClient> ConnectDummyOf(const std::string& node_address,
                                                   uint64_t mem_pool = 0,
                                                   uint64_t local_buffer = 8ull << 20) {
  store::DummyOptions o;
  o.server_address = node_address;
  o.mem_pool_size = mem_pool;
  o.local_buffer_size = local_buffer;
  auto c = store::ConnectDummy(o);
  if (!c.ok()) throw std::runtime_error("dummy of " + node_address + ": " + c.status().ToString());
  return std::move(*c);
}

inline PutConfig Placement(uint32_t replicas, const std::string& preferred = "") {
  PutConfig config;
  config.replicas = replicas;
  config.preferred_segment = preferred;
  return config;
}

inline Status PutValue(StoreClient& c, const std::string& key, size_t size,
                       const PutConfig& config = {}, uint64_t version = 0) {
  const auto v = MakeValue(key, size, version);
  return c.Put(key, v.data(), v.size(), config);
}

struct Read {
  enum Kind { kIntact, kNotFound, kError, kCorrupt } kind = kError;
  std::string detail;  // the error, or what CheckValue found wrong
};

// Get, with the bytes checked against the key's checksum.
inline Read ReadChecked(StoreClient& c, const std::string& key) {
  auto got = c.Get(key);
  if (!got.ok()) {
    const bool missing = ErrorCodeOf(got.status()) == ErrorCode::OBJECT_NOT_FOUND;
    return {missing ? Read::kNotFound : Read::kError, got.status().ToString()};
  }
  const std::string problem =
      CheckValue(key, std::span(reinterpret_cast<const uint8_t*>(got->data()), got->size()));
  if (!problem.empty()) {
    return {Read::kCorrupt, problem + " (" + std::to_string(got->size()) + " bytes)"};
  }
  return {Read::kIntact, ""};
}

inline const char* KindName(Read::Kind k) {
  switch (k) {
    case Read::kIntact:
      return "intact";
    case Read::kNotFound:
      return "not found";
    case Read::kError:
      return "error";
    case Read::kCorrupt:
      return "CORRUPT";
  }
  return "?";
}

// Outcomes a load loop saw; filled by one thread, read after it is joined.
struct Tally {
  int puts_ok = 0, puts_failed = 0;
  int reads[4] = {};
  std::vector<std::string> corrupt;     // key: what was wrong; must stay empty
  std::vector<std::string> unexpected;  // reads a fault test says must not fail, and why they did
  std::string last_put_error;

  void Count(const std::string& key, const Read& r) {
    ++reads[r.kind];
    if (r.kind == Read::kCorrupt) corrupt.push_back(key + ": " + r.detail);
  }
  int reads_total() const { return reads[0] + reads[1] + reads[2] + reads[3]; }
  std::string Summary() const {
    return "puts ok " + std::to_string(puts_ok) + ", failed " + std::to_string(puts_failed) +
           "; reads intact " + std::to_string(reads[Read::kIntact]) + ", not found " +
           std::to_string(reads[Read::kNotFound]) + ", error " +
           std::to_string(reads[Read::kError]) + ", corrupt " +
           std::to_string(reads[Read::kCorrupt]);
  }
};

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace kvtier::fault
