#include "server/l2_prefetch.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

#include "common/logging.h"

namespace kvtier {
namespace {

// Real time, not the server's injected clock: these deadlines bound a blocked condition-variable
// wait for a backend, which only real time can end.
using SteadyClock = std::chrono::steady_clock;

// One submitted task that the job waits for, or gives up on: a completion that arrives after
// the job gave up is handed to `late` so that its locks and buffers are released.
struct Tracked {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Completion> done;
  bool abandoned = false;
  std::function<void(const Completion&)> late;
};

std::shared_ptr<Tracked> Submit(L2Cascade& l2, size_t a, ConnectorOp op,
                                const CompletionRouter::SubmitFn& submit,
                                std::function<void(const Completion&)> late) {
  auto t = std::make_shared<Tracked>();
  t->late = std::move(late);
  l2.Submit(a, op, submit, [t](Completion c) {
    std::unique_lock lock(t->mu);
    if (t->abandoned) {
      lock.unlock();
      t->late(c);
      return;
    }
    t->done = std::move(c);
    t->cv.notify_all();
  });
  return t;
}

std::optional<Completion> Wait(Tracked& t, SteadyClock::time_point until,
                               const std::string& adapter) {
  std::unique_lock lock(t.mu);
  if (t.cv.wait_until(lock, until, [&] { return t.done.has_value(); })) return std::move(t.done);
  t.abandoned = true;
  KVT_LOG_ERROR("L2 adapter {} overran its deadline by more than 1 s; treating as a miss",
                adapter);
  return std::nullopt;
}

SteadyClock::time_point WaitLimit(L2Cascade& l2, size_t a) {
  return SteadyClock::now() + l2.adapter(a).Options().deadline + std::chrono::seconds(1);
}

// Keys (flat indexes) of the job that one adapter serves, with everything a late completion
// needs to undo the adapter's locks and the L1 staging objects.
struct AdapterShare {
  std::vector<size_t> index;
  std::vector<std::string> names;
  std::vector<ObjectKey> keys;
  std::vector<MutableBuffer> dst;
};

}  // namespace

// What one job knows, phase by phase. Keys are indexed flat, chunk-major: i = c * ranks + r.
struct L2Prefetcher::Plan {
  Plan(const std::vector<std::vector<ObjectKey>>& k, const std::vector<uint64_t>& s,
       size_t adapter_count)
      : keys(k),
        sizes(s),
        ranks(k.size()),
        chunks(k.empty() ? 0 : k[0].size()),
        adapters(adapter_count),
        n(ranks * chunks),
        names(std::make_shared<std::vector<std::string>>(n)) {
    for (size_t i = 0; i < n; ++i) (*names)[i] = key(i).ToString();
  }
  const ObjectKey& key(size_t i) const { return keys[i % ranks][i / ranks]; }

  const std::vector<std::vector<ObjectKey>>& keys;
  const std::vector<uint64_t>& sizes;
  const size_t ranks, chunks, adapters, n;
  // Every key's adapter name; shared with late completions, which outlive the job.
  std::shared_ptr<std::vector<std::string>> names;
  // LookupAndLock: found[a][i] set when adapter a has key i (and locked it); empty: no answer.
  std::vector<std::vector<uint8_t>> found;
  // ChooseSources: the first adapter that has each key (-1: none), and the leading chunks that
  // every rank has somewhere.
  std::vector<int> from;
  size_t found_chunks = 0;
  // ReserveInL1: the staging objects (by rank, chunk), the keys already resident in L1 (pinned
  // instead of loaded), and the leading chunks the job goes on with.
  std::vector<std::vector<WriteSlot>> slots;
  std::vector<uint8_t> present;
  size_t planned = 0;
  // LoadIntoL1, over the first planned * ranks keys: now in L1, or left to a late completion.
  std::vector<uint8_t> loaded;
  std::vector<uint8_t> abandoned;
};

L2PrefetchResult L2Prefetcher::Run(const std::vector<std::vector<ObjectKey>>& keys,
                                   const std::vector<uint64_t>& sizes) {
  if (keys.empty() || keys[0].empty() || l2_.size() == 0) return {};
  Plan plan(keys, sizes, l2_.size());
  LookupAndLock(plan);
  ChooseSources(plan);
  ReserveInL1(plan);
  UnlockOutsidePlan(plan);
  if (plan.planned == 0) return {};
  LoadIntoL1(plan);
  return Publish(plan);
}

// Every available adapter at once: the last one on this thread, when it can (no hand-off to its
// worker and back, the whole cost when there is one adapter).
void L2Prefetcher::LookupAndLock(Plan& p) {
  p.found.assign(p.adapters, {});
  std::vector<size_t> up;
  for (size_t a = 0; a < p.adapters; ++a) {
    if (l2_.Available(a, ConnectorOp::kLookup)) up.push_back(a);
  }
  const auto names = p.names;
  std::optional<Completion> now;
  std::vector<std::shared_ptr<Tracked>> t(p.adapters);
  for (size_t a : up) {
    if (a == up.back() && (now = l2_.LookupNow(a, *names))) break;
    t[a] = Submit(
        l2_, a, ConnectorOp::kLookup, [&](Connector& c) { return c.SubmitLookup(*names); },
        [this, a, names](const Completion& c) { Unlock(a, *names, c.results); });
  }
  if (now && now->results.size() == p.n) p.found[up.back()] = std::move(now->results);
  for (size_t a = 0; a < p.adapters; ++a) {
    if (!t[a]) continue;
    auto c = Wait(*t[a], WaitLimit(l2_, a), l2_.name(a));
    if (c && c->results.size() == p.n) p.found[a] = std::move(c->results);
  }
}

void L2Prefetcher::ChooseSources(Plan& p) {
  p.from.assign(p.n, -1);
  for (size_t i = 0; i < p.n; ++i) {
    for (size_t a = 0; a < p.adapters && p.from[i] < 0; ++a) {
      if (!p.found[a].empty() && p.found[a][i]) p.from[i] = static_cast<int>(a);
    }
  }
  auto chunk_found = [&](size_t c) {
    for (size_t r = 0; r < p.ranks; ++r) {
      if (p.from[c * p.ranks + r] < 0) return false;
    }
    return true;
  };
  p.found_chunks = 0;
  while (p.found_chunks < p.chunks && chunk_found(p.found_chunks)) ++p.found_chunks;
}

// Halves the plan while L1 has no room. A key that is already resident (stored meanwhile, or
// held in L1 by another rank's pins) is pinned instead of loaded; one that someone else is
// writing ends the plan.
void L2Prefetcher::ReserveInL1(Plan& p) {
  p.slots.assign(p.ranks, {});
  size_t reserved = p.found_chunks;
  while (reserved > 0 && !Reserve(p.keys, p.sizes, reserved, p.slots)) reserved /= 2;
  p.present.assign(p.n, 0);
  p.planned = reserved;
  for (size_t c = 0; c < p.planned; ++c) {
    for (size_t r = 0; r < p.ranks && c < p.planned; ++r) {
      if (p.slots[r][c].data != nullptr) continue;
      auto pin = l1_.Pin(std::span(&p.keys[r][c], 1));
      if (pin[0].data != nullptr && pin[0].size == p.sizes[r]) {
        p.present[c * p.ranks + r] = 1;
        continue;
      }
      if (pin[0].data != nullptr) l1_.Unpin(std::span(&p.keys[r][c], 1));
      p.planned = c;
    }
  }
  std::vector<ObjectKey> unused, unpin;
  for (size_t r = 0; r < p.ranks; ++r) {
    for (size_t c = p.planned; c < reserved; ++c) {
      if (p.slots[r][c].data != nullptr) unused.push_back(p.keys[r][c]);
      if (p.present[c * p.ranks + r]) unpin.push_back(p.keys[r][c]);
    }
  }
  l1_.AbortWrite(unused);
  l1_.Unpin(unpin);
}

// The phase-1 unlock: every adapter lock outside the plan, and on keys L1 already has.
void L2Prefetcher::UnlockOutsidePlan(const Plan& p) {
  for (size_t a = 0; a < p.adapters; ++a) {
    if (p.found[a].empty()) continue;
    std::vector<uint8_t> drop(p.n, 0);
    for (size_t i = 0; i < p.n; ++i) {
      const bool in_plan =
          i / p.ranks < p.planned && !p.present[i] && p.from[i] == static_cast<int>(a);
      drop[i] = p.found[a][i] && !in_plan;
    }
    Unlock(a, *p.names, drop);
  }
}

// Each adapter's share straight into the staging objects, then the phase-2 unlock.
void L2Prefetcher::LoadIntoL1(Plan& p) {
  const size_t m = p.planned * p.ranks;
  p.loaded.assign(m, 0);
  p.abandoned.assign(m, 0);
  std::vector<std::shared_ptr<AdapterShare>> share(p.adapters);
  std::vector<std::shared_ptr<Tracked>> t(p.adapters);
  for (size_t i = 0; i < m; ++i) {
    if (p.present[i]) {
      p.loaded[i] = 1;
      continue;
    }
    auto& s = share[p.from[i]];
    if (!s) s = std::make_shared<AdapterShare>();
    const size_t r = i % p.ranks, c = i / p.ranks;
    s->index.push_back(i);
    s->names.push_back((*p.names)[i]);
    s->keys.push_back(p.keys[r][c]);
    s->dst.push_back({p.slots[r][c].data, p.sizes[r]});
  }
  for (size_t a = 0; a < p.adapters; ++a) {
    if (!share[a]) continue;
    auto s = share[a];
    t[a] = Submit(
        l2_, a, ConnectorOp::kLoad, [&](Connector& c) { return c.SubmitLoad(s->names, s->dst); },
        [this, a, s](const Completion&) {
          l2_.adapter(a).Unlock(s->names);
          l1_.AbortWrite(s->keys);
        });
  }
  for (size_t a = 0; a < p.adapters; ++a) {
    if (!t[a]) continue;
    const AdapterShare& s = *share[a];
    auto c = Wait(*t[a], WaitLimit(l2_, a), l2_.name(a));
    if (!c) {
      for (size_t i : s.index) p.abandoned[i] = 1;  // the late completion cleans up
      continue;
    }
    for (size_t j = 0; j < s.index.size() && j < c->results.size(); ++j) {
      p.loaded[s.index[j]] = c->results[j];
    }
    l2_.adapter(a).Unlock(s.names);
  }
}

// The leading complete chunks pinned for the RETRIEVEs, loaded keys after a gap unpinned, failed
// keys dropped.
L2PrefetchResult L2Prefetcher::Publish(const Plan& p) {
  const size_t m = p.planned * p.ranks;
  auto chunk_loaded = [&](size_t c) {
    for (size_t r = 0; r < p.ranks; ++r) {
      if (!p.loaded[c * p.ranks + r]) return false;
    }
    return true;
  };
  L2PrefetchResult out;
  while (out.chunks < p.planned && chunk_loaded(out.chunks)) ++out.chunks;
  std::vector<ObjectKey> publish_pinned, rest_loaded, failed, rest_present;
  for (size_t i = 0; i < m; ++i) {
    if (p.abandoned[i]) continue;
    const ObjectKey& k = p.key(i);
    if (i < out.chunks * p.ranks) {
      out.pinned.push_back(k);
      if (!p.present[i]) publish_pinned.push_back(k);
    } else if (p.present[i]) {
      rest_present.push_back(k);
    } else {
      (p.loaded[i] ? rest_loaded : failed).push_back(k);
    }
  }
  l1_.FinishWrite(publish_pinned, /*pin_count=*/1);
  l1_.FinishWrite(rest_loaded);
  l1_.AbortWrite(failed);
  l1_.Unpin(rest_present);
  return out;
}

bool L2Prefetcher::Reserve(const std::vector<std::vector<ObjectKey>>& keys,
                           const std::vector<uint64_t>& sizes, size_t count,
                           std::vector<std::vector<WriteSlot>>& slots) {
  for (size_t r = 0; r < keys.size(); ++r) {
    auto s = l1_.ReserveWrite(std::span(keys[r]).first(count), sizes[r]);
    if (s.ok()) {
      slots[r] = std::move(s).value();
      continue;
    }
    for (size_t q = 0; q < r; ++q) {  // all or nothing across ranks
      std::vector<ObjectKey> mine;
      for (size_t c = 0; c < count; ++c) {
        if (slots[q][c].data != nullptr) mine.push_back(keys[q][c]);
      }
      l1_.AbortWrite(mine);
    }
    return false;
  }
  return true;
}

void L2Prefetcher::Unlock(size_t adapter, const std::vector<std::string>& names,
                          const std::vector<uint8_t>& which) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < which.size() && i < names.size(); ++i) {
    if (which[i]) keys.push_back(names[i]);
  }
  if (!keys.empty()) l2_.adapter(adapter).Unlock(keys);
}

}  // namespace kvtier
