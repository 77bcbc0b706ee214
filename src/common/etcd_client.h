// A small synchronous client of etcd's v3 API through its JSON gateway (POST /v3/kv/*,
// /v3/lease/* over plain HTTP): get/put/delete, prefix listing, compare-and-swap transactions and
// leases. Enough for metadata that several processes share (membership, ownership by lease);
// no watches. Keys and values are arbitrary bytes.
//
// Failover: a request that cannot reach one endpoint tries the next; the one that answered last
// is tried first next time. A request that may already have been applied (a txn or a lease grant
// whose answer was lost) is not sent again: the caller gets kUnavailable and decides.
// Thread-safe: every request uses its own connection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/etcd_address.h"
#include "common/status.h"

namespace kvtier {

struct EtcdKv {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, lease = 0;
};

// One operation of a transaction.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kGet };
  Kind kind = Kind::kPut;
  std::string key, value;  // value: puts only
  int64_t lease = 0;       // puts only; 0: none
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key);  // one key
  static EtcdOp Get(std::string key);     // one key
};

// Holds when the key's create_revision equals `create_revision` (0: the key does not exist).
struct EtcdCompare {
  std::string key;
  int64_t create_revision = 0;
};

struct EtcdTxnResult {
  bool succeeded = false;
  int64_t revision = 0;     // header revision after the txn
  std::vector<EtcdKv> kvs;  // every kv returned by Get ops of the branch that ran, in order
};

class EtcdClient {
 public:
  // endpoints: "host:port[,host:port...]" (ParseEtcdEndpointList's forms; plain http).
  // `timeout` bounds connecting to and waiting for one endpoint.
  explicit EtcdClient(std::string endpoints,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const std::string& endpoints() const { return endpoints_; }

  // The lease id. etcd raises a TTL below its minimum (2 s by default) to that minimum.
  Result<int64_t> GrantLease(int64_t ttl_s);
  // Remaining TTL in s; 0: the lease is gone (expired or revoked).
  Result<int64_t> KeepAlive(int64_t lease_id);
  // kNotFound when the lease is already gone.
  Status RevokeLease(int64_t lease_id);

  Result<std::optional<EtcdKv>> Get(const std::string& key);
  Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  Status Delete(const std::string& key);
  // Every key starting with `prefix` (a scratch cluster's records, say).
  Status DeletePrefix(const std::string& prefix);

  // Every key starting with `prefix` (empty: all keys), in key order, read in pages of
  // `page_size` (0: one page) and each passed to fn. All pages are read at the first page's
  // revision, so a concurrent writer cannot tear the listing.
  Status RangePrefix(const std::string& prefix, const std::function<void(const EtcdKv&)>& fn,
                     size_t page_size = 1000);

  Result<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                            const std::vector<EtcdOp>& success,
                            const std::vector<EtcdOp>& failure = {});

 private:
  // POSTs `body` to `path` and answers the parsed JSON of a 2xx answer. `resend_safe`: the
  // request may go to the next endpoint even after it was sent (it is idempotent).
  Result<nlohmann::json> Call(const std::string& path, const nlohmann::json& body,
                              bool resend_safe);

  std::string endpoints_;
  std::vector<EtcdEndpoint> parsed_;
  std::string parse_error_;  // non-empty when `endpoints_` is malformed
  std::chrono::milliseconds timeout_;
  std::atomic<size_t> preferred_{0};
};

}  // namespace kvtier
