#include "connectors/resp_cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/logging.h"
#include "common/printable.h"

namespace kvtier {
namespace {

using SteadyClock = std::chrono::steady_clock;

// What a failed read of the map says, at most this many nodes' reasons.
constexpr size_t kReasonsShown = 3;

bool SameRouting(const RespSlotMap& a, const RespSlotMap& b) {
  return a.primaries == b.primaries && a.owner == b.owner;
}

}  // namespace

RespSlotCache::RespSlotCache(RespEndpoint base, std::vector<RespShard> more_seeds,
                             const Clock* clock)
    : base_(std::move(base)),
      name_("resp cluster " + RespShard{base_.host, base_.port}.Text()),
      clock_(clock) {
  seeds_.push_back(RespShard{base_.host, base_.port});
  for (RespShard& n : more_seeds) {
    if (std::find(seeds_.begin(), seeds_.end(), n) == seeds_.end()) seeds_.push_back(std::move(n));
  }
}

std::shared_ptr<const RespSlotMap> RespSlotCache::Current() const {
  std::lock_guard lock(map_mu_);
  return map_;
}

RespEndpoint RespSlotCache::EndpointFor(const RespShard& node) const {
  RespEndpoint ep = base_;
  ep.host = node.host;
  ep.port = node.port;
  ep.cluster = true;
  return ep;
}

Result<std::shared_ptr<const RespSlotMap>> RespSlotCache::Refresh(Deadline d, bool force) {
  const uint64_t gen = refreshes_.load();
  {
    std::unique_lock lock(read_mu_);
    if (!read_cv_.wait_until(lock, d, [&] { return !reading_; })) {
      return Status(Code::kTimeout, name_ + ": deadline passed waiting for the slot map");
    }
    reading_ = true;
  }
  struct Release {
    RespSlotCache& c;
    ~Release() {
      {
        std::lock_guard lock(c.read_mu_);
        c.reading_ = false;
      }
      c.read_cv_.notify_all();
    }
  } release{*this};
  std::shared_ptr<const RespSlotMap> cur = Current();
  if (cur != nullptr) {
    if (refreshes_.load() != gen) return cur;  // another thread read it while this one waited
    const int64_t since = clock_->NowNs() - last_read_ns_;
    if (!force && since < std::chrono::nanoseconds(kRespMinRefreshInterval).count()) return cur;
  }
  last_read_ns_ = clock_->NowNs();

  // The seeds first (what the operator named), then every node the last map knew: after the
  // seed itself failed, a replica promoted in its place still knows the cluster.
  std::vector<RespShard> nodes = seeds_;
  if (cur != nullptr) {
    for (const auto* list : {&cur->primaries, &cur->replicas}) {
      for (const RespShard& n : *list) {
        if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
      }
    }
  }
  std::vector<std::string> reasons;
  for (const RespShard& node : nodes) {
    if (SteadyClock::now() >= d) break;
    Result<RespSlotMap> m = FetchRespSlotMap(base_, node, d);
    if (!m.ok()) {
      if (reasons.size() < kReasonsShown) reasons.push_back(m.status().message());
      continue;
    }
    auto next = std::make_shared<const RespSlotMap>(std::move(m).value());
    if (cur == nullptr || !SameRouting(*cur, *next)) {
      KVT_LOG_INFO("{}: slot map from {}: {} primaries", name_, next->source,
                   next->primaries.size());
    }
    {
      std::lock_guard map_lock(map_mu_);
      map_ = next;
    }
    stale_.store(false);
    refreshes_.fetch_add(1);
    return std::shared_ptr<const RespSlotMap>(next);
  }
  const Code code = SteadyClock::now() >= d ? Code::kTimeout : Code::kUnavailable;
  std::string why = fmt::format("{}", fmt::join(reasons, "; "));
  if (nodes.size() > reasons.size()) why += fmt::format("; {} nodes in all", nodes.size());
  return Status(code, fmt::format("{}: no node answered CLUSTER SLOTS ({})", name_, why));
}

RespClusterConn::RespClusterConn(std::shared_ptr<RespSlotCache> cache) : cache_(std::move(cache)) {}

Status RespClusterConn::Get(std::span<const std::string> keys, std::span<const MutableBuffer> dst,
                            Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
  Call call{Op::kGet, keys, {}, dst, d, out, 0, Status()};
  Status s = Route(call);
  bytes += call.bytes;
  return s;
}

Status RespClusterConn::Set(std::span<const std::string> keys, std::span<const ConstBuffer> src,
                            Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
  Call call{Op::kSet, keys, src, {}, d, out, 0, Status()};
  Status s = Route(call);
  bytes += call.bytes;
  return s;
}

Status RespClusterConn::Exists(std::span<const std::string> keys, Deadline d,
                               std::span<uint8_t> out) {
  Call call{Op::kExists, keys, {}, {}, d, out, 0, Status()};
  return Route(call);
}

Status RespClusterConn::Del(std::span<const std::string> keys, Deadline d, std::span<uint8_t> out) {
  Call call{Op::kDel, keys, {}, {}, d, out, 0, Status()};
  return Route(call);
}

Result<std::shared_ptr<const RespSlotMap>> RespClusterConn::MapFor(Deadline d) {
  std::shared_ptr<const RespSlotMap> cur = cache_->Current();
  if (cur != nullptr && !cache_->stale()) return cur;
  auto fresh = cache_->Refresh(d);
  if (fresh.ok() || cur == nullptr) return fresh;
  // No node answered: route with the old map; keys of unreachable nodes fail on their own.
  KVT_LOG_DEBUG("{}", fresh.status().message());
  return cur;
}

Status RespClusterConn::Route(Call& call) {
  auto got = MapFor(call.deadline);
  if (!got.ok()) return got.status();
  const std::shared_ptr<const RespSlotMap> map = std::move(got).value();
  Prune(*map);

  std::vector<Group> groups(map->primaries.size());
  for (size_t m = 0; m < groups.size(); ++m) groups[m].node = map->primaries[m];
  for (size_t i = 0; i < call.keys.size(); ++i) {
    const uint16_t slot = RespKeySlot(call.keys[i]);
    const int16_t owner = map->owner[slot];
    if (owner < 0) {
      if (call.first_error.ok()) {
        call.first_error =
            Status(Code::kUnavailable,
                   fmt::format("{}: no primary serves slot {} (key '{}'; map from {})",
                               cache_->name(), slot, PrintableText(call.keys[i]), map->source));
      }
      cache_->MarkStale();
      continue;
    }
    groups[static_cast<size_t>(owner)].keys.push_back(i);
  }

  bool refreshed = false;
  for (int round = 0;; ++round) {
    std::vector<Retry> retries;
    for (const Group& g : groups) {
      if (!g.keys.empty()) RunGroup(call, g, retries);
    }
    if (retries.empty()) break;
    if (round == kRespMaxRedirects) {
      if (call.first_error.ok()) {
        const Retry& r = retries.front();
        call.first_error = Status(
            Code::kUnavailable,
            fmt::format("{}: key '{}' redirected more than {} times (last: {}){}", cache_->name(),
                        PrintableText(call.keys[r.key]), kRespMaxRedirects, r.text,
                        retries.size() > 1 ? fmt::format(", and {} more keys", retries.size() - 1)
                                           : std::string()));
      }
      break;
    }
    // A MOVED says the map is out of date: read it again for the calls to come (once per call,
    // rate-limited); the keys themselves go where the MOVED said, which needs no map.
    const bool moved =
        std::any_of(retries.begin(), retries.end(), [](const Retry& r) { return !r.to.ask; });
    if (moved && !refreshed) {
      refreshed = true;
      auto fresh = cache_->Refresh(call.deadline);
      if (!fresh.ok()) KVT_LOG_DEBUG("{}", fresh.status().message());
    }
    groups.clear();
    for (Retry& r : retries) {
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const Group& x) { return x.ask == r.to.ask && x.node == r.to.to; });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{r.to.to, r.to.ask, {}});
      g->keys.push_back(r.key);
    }
  }
  return call.first_error;
}

void RespClusterConn::RunGroup(Call& call, const Group& g, std::vector<Retry>& retries) {
  auto fail = [&](Status s) {
    if (call.first_error.ok()) call.first_error = std::move(s);
  };
  if (SteadyClock::now() >= call.deadline) {
    // Not asked at all: asking would only time out at once and drop a healthy connection.
    fail(Status(Code::kTimeout, fmt::format("resp {}: deadline passed before {} keys were sent",
                                            g.node.Text(), g.keys.size())));
    return;
  }
  const size_t n = g.keys.size();
  sub_keys_.resize(n);
  sub_out_.assign(n, 0);
  for (size_t j = 0; j < n; ++j) sub_keys_[j] = call.keys[g.keys[j]];
  if (call.op == Op::kGet) {
    sub_dst_.resize(n);
    for (size_t j = 0; j < n; ++j) sub_dst_[j] = call.dst[g.keys[j]];
  } else if (call.op == Op::kSet) {
    sub_src_.resize(n);
    for (size_t j = 0; j < n; ++j) sub_src_[j] = call.src[g.keys[j]];
  }

  RespConnection& c = ConnFor(g.node);
  c.set_asking(g.ask);
  const std::span<const std::string> keys(sub_keys_.data(), n);
  const std::span<uint8_t> out(sub_out_.data(), n);
  uint64_t bytes = 0;
  Status s;
  switch (call.op) {
    case Op::kGet:
      s = c.Get(keys, std::span<const MutableBuffer>(sub_dst_.data(), n), call.deadline, out,
                bytes);
      break;
    case Op::kSet:
      s = c.Set(keys, std::span<const ConstBuffer>(sub_src_.data(), n), call.deadline, out, bytes);
      break;
    case Op::kExists:
      s = c.Exists(keys, call.deadline, out);
      break;
    case Op::kDel:
      s = c.Del(keys, call.deadline, out);
      break;
  }
  call.bytes += bytes;
  for (size_t j = 0; j < n; ++j) {
    call.out[g.keys[j]] = sub_out_[j];
    const std::string& text = c.redirect(j);
    if (text.empty()) continue;
    if (auto r = ParseRespRedirect(text, g.node)) {
      retries.push_back(Retry{g.keys[j], std::move(*r), text});
    } else {
      fail(Status(Code::kProtocolError, fmt::format("resp {}: unreadable redirection '{}'",
                                                    g.node.Text(), PrintableText(text))));
    }
  }
  c.set_asking(false);
  if (!s.ok()) {
    // A node that cannot be reached may have failed over: read the map at the next call.
    if (!c.connected()) cache_->MarkStale();
    fail(std::move(s));
  }
}

RespConnection& RespClusterConn::ConnFor(const RespShard& node) {
  std::string key = node.Text();
  auto it = conns_.find(key);
  if (it == conns_.end()) {
    it = conns_.emplace(std::move(key), std::make_unique<RespConnection>(cache_->EndpointFor(node)))
             .first;
  }
  return *it->second;
}

void RespClusterConn::Prune(const RespSlotMap& map) {
  const uint64_t gen = cache_->generation();
  if (gen == pruned_at_) return;
  pruned_at_ = gen;
  std::erase_if(conns_, [&](const auto& kv) {
    return std::none_of(map.primaries.begin(), map.primaries.end(),
                        [&](const RespShard& m) { return m.Text() == kv.first; });
  });
}

}  // namespace kvtier
