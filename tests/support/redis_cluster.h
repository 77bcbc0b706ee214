// A real Redis Cluster for tests: `primaries` primaries with `replicas` replicas each, every node a
// RedisProcess (free port on 127.0.0.1, its own temp dir holding its nodes.conf, no persistence,
// PR_SET_PDEATHSIG, stopped by PID), formed by hand the way `redis-cli --cluster create` does it:
// CLUSTER MEET, ADDSLOTSRANGE, REPLICATE, then polling until every node agrees. Header-only like
// redis_process.h; it talks to the nodes with hiredis, so a test including it links
// kvt_connectors (which brings hiredis).
//
// Nodes 0..primaries-1 start as primaries (primary m owns an equal share of the slots, in order);
// replica k of primary m is node primaries + m * replicas + k.
#pragma once

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_process.h"

namespace kvtier::testing {

class RedisCluster {
 public:
  struct ReplyFree {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;

  struct Options {
    size_t primaries = 3;
    size_t replicas = 1;  // per primary
    // Long enough that no automatic failover starts while a test looks at an outage; tests
    // promote a replica with CLUSTER FAILOVER TAKEOVER, which needs no timeout.
    int node_timeout_ms = 5000;
  };

  // Starts and forms the cluster; nullptr (after printing why) when it did not come up within
  // 30 s.
  static std::unique_ptr<RedisCluster> Start(Options o) {
    std::unique_ptr<RedisCluster> c(new RedisCluster(o));
    const size_t n = o.primaries * (1 + o.replicas);
    for (size_t i = 0; i < n; ++i) {
      // The cluster bus gets a free port of its own (by default it would be port + 10000, which
      // nobody checked); the launcher picks both and starts again on a lost race.
      std::unique_ptr<RedisProcess> node = RedisProcess::StartClusterNode(
          {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
           "--cluster-node-timeout", std::to_string(o.node_timeout_ms),
           // Keys of live primaries stay served while another primary is down.
           "--cluster-require-full-coverage", "no",
           // A replica's first sync starts at once, not after the default 5 s wait for others.
           "--repl-diskless-sync-delay", "0"});
      if (!node) return nullptr;
      c->nodes_.push_back(std::move(node));
    }
    if (!c->Form()) {
      std::fprintf(stderr, "RedisCluster: the cluster did not form\n");
      return nullptr;
    }
    return c;
  }
  static std::unique_ptr<RedisCluster> Start() { return Start(Options{}); }

  size_t size() const { return nodes_.size(); }
  size_t primaries() const { return o_.primaries; }
  uint16_t port(size_t i) const { return nodes_[i]->port(); }
  const std::string& id(size_t i) const { return ids_[i]; }
  bool alive(size_t i) const { return nodes_[i]->pid() > 0; }
  size_t ReplicaOf(size_t primary, size_t k = 0) const {
    return o_.primaries + primary * o_.replicas + k;
  }
  // The node listening on `port`; size() when none.
  size_t NodeAt(uint16_t p) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (port(i) == p) return i;
    }
    return nodes_.size();
  }

  // SIGKILL, as in a crash.
  void Kill(size_t i) { nodes_[i]->Kill(); }

  // One command on node i over a fresh connection; null when the node does not answer.
  Reply Command(size_t i, const std::vector<std::string>& words) const {
    auto replies = Commands(i, {words});
    return replies.empty() ? nullptr : std::move(replies[0]);
  }
  // Several commands, one after another on one connection (e.g. a write, then WAIT, which waits
  // for the replication of that connection's writes); stops at the first one not answered.
  std::vector<Reply> Commands(size_t i, const std::vector<std::vector<std::string>>& cmds) const {
    std::vector<Reply> out;
    const timeval tv{10, 0};
    redisContext* ctx = redisConnectWithTimeout("127.0.0.1", port(i), tv);
    if (ctx == nullptr || ctx->err != 0) {
      if (ctx != nullptr) redisFree(ctx);
      return out;
    }
    redisSetTimeout(ctx, tv);
    for (const auto& words : cmds) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& w : words) {
        argv.push_back(w.data());
        lens.push_back(w.size());
      }
      Reply r(static_cast<redisReply*>(
          redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data())));
      if (!r) break;
      out.push_back(std::move(r));
    }
    redisFree(ctx);
    return out;
  }

  // A reply as text: a string, status or number as such, an error as "-ERR ...", nil as
  // "(nil)", an array as "(array)"; "(no answer)" when the node does not answer.
  std::string Text(size_t i, const std::vector<std::string>& words) const {
    Reply r = Command(i, words);
    if (!r) return "(no answer)";
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        return std::string(r->str, r->len);
      case REDIS_REPLY_ERROR:
        return "-" + std::string(r->str, r->len);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_NIL:
        return "(nil)";
      default:
        return "(array)";
    }
  }

  // The node that serves `slot` as a primary according to node `asked`; size() when none.
  size_t OwnerOf(uint16_t slot, size_t asked = 0) const {
    for (const auto& [range, primary] : SlotRanges(asked)) {
      if (range.first <= slot && slot <= range.second) return NodeAt(primary);
    }
    return nodes_.size();
  }
  // The primary that owns `key` (CLUSTER KEYSLOT, then OwnerOf); size() when unknown.
  size_t OwnerOfKey(const std::string& key, size_t asked = 0) const {
    Reply r = Command(asked, {"CLUSTER", "KEYSLOT", key});
    if (!r || r->type != REDIS_REPLY_INTEGER) return nodes_.size();
    return OwnerOf(static_cast<uint16_t>(r->integer), asked);
  }

  // Polls (at most 30 s) until every live node says cluster_state:ok, all report the same
  // slot owners, and every live replica's link to its primary is up.
  bool WaitConverged() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      if (Converged()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Slot migration in the steps redis-cli --cluster reshard takes, split so that a test can stop
  // halfway. Begin: `to` IMPORTING, `from` MIGRATING. Keys: MIGRATE the given keys (all of the
  // slot's when empty). Finish: every primary learns that `to` owns the slot.
  bool BeginMigration(uint16_t slot, size_t from, size_t to) const {
    const std::string s = std::to_string(slot);
    return Text(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)}) == "OK" &&
           Text(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)}) == "OK";
  }
  bool MigrateKeys(uint16_t slot, size_t from, size_t to,
                   std::vector<std::string> keys = {}) const {
    if (keys.empty()) {
      Reply r = Command(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100000"});
      if (!r || r->type != REDIS_REPLY_ARRAY) return false;
      for (size_t i = 0; i < r->elements; ++i) {
        keys.emplace_back(r->element[i]->str, r->element[i]->len);
      }
      if (keys.empty()) return true;
    }
    // MIGRATE host port "" db timeout_ms KEYS key...
    std::vector<std::string> words = {"MIGRATE", "127.0.0.1", std::to_string(port(to))};
    words.insert(words.end(), {"", "0", "10000", "KEYS"});
    words.insert(words.end(), keys.begin(), keys.end());
    return Text(from, words) == "OK";
  }
  // Gossip carrying the old owner's claim can undo a SETSLOT on a node whose config epoch is not
  // the highest (seen once in a clean-clone run: `to` answered MOVED to the old owner). So `to`
  // first takes the highest epoch, and the SETSLOTs are repeated until every primary agrees.
  bool FinishMigration(uint16_t slot, size_t to) const {
    const std::string s = std::to_string(slot);
    (void)Text(to, {"CLUSTER", "BUMPEPOCH"});
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (Text(to, {"CLUSTER", "SETSLOT", s, "NODE", id(to)}) != "OK") return false;
      bool agreed = true;
      for (size_t m = 0; m < nodes_.size(); ++m) {
        if (m == to || !alive(m) || Role(m) != "master") continue;
        if (Text(m, {"CLUSTER", "SETSLOT", s, "NODE", id(to)}) != "OK") return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a gossip round may undo it
      for (size_t m = 0; m < nodes_.size(); ++m) {
        if (alive(m) && Role(m) == "master" && OwnerOf(slot, m) != to) agreed = false;
      }
      if (agreed) return true;
    }
    return false;
  }

  // INFO replication's role, in Redis's words "master" (a primary) or "slave"; "" if no answer.
  std::string Role(size_t i) const { return InfoField(i, "replication", "role"); }

 private:
  explicit RedisCluster(Options o) : o_(o) {}

  std::string InfoField(size_t i, const std::string& section, const std::string& field) const {
    const std::string info = "\n" + Text(i, {"INFO", section});
    const std::string want = "\n" + field + ":";
    const size_t at = info.find(want);
    if (at == std::string::npos) return "";
    const size_t begin = at + want.size();
    return info.substr(begin, info.find_first_of("\r\n", begin) - begin);
  }

  // [lo, hi] -> the primary's port, per node i's CLUSTER SLOTS.
  std::map<std::pair<uint16_t, uint16_t>, uint16_t> SlotRanges(size_t i) const {
    std::map<std::pair<uint16_t, uint16_t>, uint16_t> out;
    Reply r = Command(i, {"CLUSTER", "SLOTS"});
    if (!r || r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t k = 0; k < r->elements; ++k) {
      const redisReply* e = r->element[k];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
      out[{static_cast<uint16_t>(e->element[0]->integer),
           static_cast<uint16_t>(e->element[1]->integer)}] =
          static_cast<uint16_t>(e->element[2]->element[1]->integer);
    }
    return out;
  }

  bool Converged() const {
    std::map<std::pair<uint16_t, uint16_t>, uint16_t> first;
    bool have_first = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!alive(i)) continue;
      if (Text(i, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
      auto ranges = SlotRanges(i);
      if (!have_first) {
        first = std::move(ranges);
        have_first = true;
      } else if (ranges != first) {
        return false;
      }
      const std::string role = Role(i);
      if (role == "slave" && InfoField(i, "replication", "master_link_status") != "up") {
        return false;
      }
      if (role.empty()) return false;
    }
    // Every range served by a live primary.
    return have_first && std::all_of(first.begin(), first.end(), [&](const auto& kv) {
             const size_t owner = NodeAt(kv.second);
             return owner < nodes_.size() && alive(owner);
           });
  }

  bool Form() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      ids_.push_back(Text(i, {"CLUSTER", "MYID"}));
      if (ids_.back().size() != 40) return false;
    }
    for (size_t i = 1; i < nodes_.size(); ++i) {
      if (Text(0, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(port(i)),
                   std::to_string(nodes_[i]->bus_port())}) != "OK") {
        return false;
      }
    }
    for (size_t m = 0; m < o_.primaries; ++m) {
      const size_t lo = m * 16384 / o_.primaries, hi = (m + 1) * 16384 / o_.primaries - 1;
      if (Text(m, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)}) != "OK") {
        return false;
      }
    }
    // A replica can follow its primary only once it knows it, i.e. once the MEETs have spread.
    const std::string known = "cluster_known_nodes:" + std::to_string(nodes_.size()) + "\r\n";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (size_t i = 0; i < nodes_.size();) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (Text(i, {"CLUSTER", "INFO"}).find(known) != std::string::npos) {
        ++i;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    for (size_t m = 0; m < o_.primaries; ++m) {
      for (size_t k = 0; k < o_.replicas; ++k) {
        if (Text(ReplicaOf(m, k), {"CLUSTER", "REPLICATE", id(m)}) != "OK") return false;
      }
    }
    return WaitConverged();
  }

  Options o_;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace kvtier::testing
