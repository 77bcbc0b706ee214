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

L2PrefetchResult L2Prefetcher::Run(const std::vector<std::vector<ObjectKey>>& keys,
                                   const std::vector<uint64_t>& sizes) {
  const size_t ranks = keys.size();
  const size_t chunks = ranks == 0 ? 0 : keys[0].size();
  const size_t adapters = l2_.size();
  if (chunks == 0 || adapters == 0) return {};
  // Flat, chunk-major: index i = c * ranks + r.
  const size_t n = chunks * ranks;
  auto key_at = [&](size_t i) -> const ObjectKey& { return keys[i % ranks][i / ranks]; };
  auto names = std::make_shared<std::vector<std::string>>(n);
  for (size_t i = 0; i < n; ++i) (*names)[i] = key_at(i).ToString();

  // 1. Lookup-and-lock in every available adapter at once: the last one on this thread, when it
  // can (no hand-off to its worker and back, the whole cost when there is one adapter).
  std::vector<std::vector<uint8_t>> found(adapters);  // empty: no answer
  {
    std::vector<size_t> up;
    for (size_t a = 0; a < adapters; ++a) {
      if (l2_.Available(a, ConnectorOp::kLookup)) up.push_back(a);
    }
    std::optional<Completion> now;
    std::vector<std::shared_ptr<Tracked>> t(adapters);
    for (size_t a : up) {
      if (a == up.back() && (now = l2_.LookupNow(a, *names))) break;
      t[a] = Submit(
          l2_, a, ConnectorOp::kLookup, [&](Connector& c) { return c.SubmitLookup(*names); },
          [this, a, names](const Completion& c) { Unlock(a, *names, c.results); });
    }
    if (now && now->results.size() == n) found[up.back()] = std::move(now->results);
    for (size_t a = 0; a < adapters; ++a) {
      if (!t[a]) continue;
      auto c = Wait(*t[a], WaitLimit(l2_, a), l2_.name(a));
      if (c && c->results.size() == n) found[a] = std::move(c->results);
    }
  }

  // 2. Plan: the first adapter that has each key; the leading run of chunks every rank has.
  std::vector<int> from(n, -1);
  for (size_t i = 0; i < n; ++i) {
    for (size_t a = 0; a < adapters && from[i] < 0; ++a) {
      if (!found[a].empty() && found[a][i]) from[i] = static_cast<int>(a);
    }
  }
  size_t planned = 0;
  auto chunk_found = [&](size_t c) {
    for (size_t r = 0; r < ranks; ++r) {
      if (from[c * ranks + r] < 0) return false;
    }
    return true;
  };
  while (planned < chunks && chunk_found(planned)) ++planned;

  // 3. Reserve L1, halving the plan while there is no room. A key that is already resident
  // (stored meanwhile, or held in L1 by another rank's pins) is pinned instead of loaded; one
  // that someone else is writing ends the plan.
  std::vector<std::vector<WriteSlot>> slots(ranks);
  size_t reserved = planned;
  while (reserved > 0 && !Reserve(keys, sizes, reserved, slots)) reserved /= 2;
  std::vector<uint8_t> present(n, 0);  // flat index, like `from`
  size_t plan = reserved;
  for (size_t c = 0; c < plan; ++c) {
    for (size_t r = 0; r < ranks && c < plan; ++r) {
      if (slots[r][c].data != nullptr) continue;
      auto pin = l1_.Pin(std::span(&keys[r][c], 1));
      if (pin[0].data != nullptr && pin[0].size == sizes[r]) {
        present[c * ranks + r] = 1;
        continue;
      }
      if (pin[0].data != nullptr) l1_.Unpin(std::span(&keys[r][c], 1));
      plan = c;
    }
  }
  {
    std::vector<ObjectKey> unused, unpin;
    for (size_t r = 0; r < ranks; ++r) {
      for (size_t c = plan; c < reserved; ++c) {
        if (slots[r][c].data != nullptr) unused.push_back(keys[r][c]);
        if (present[c * ranks + r]) unpin.push_back(keys[r][c]);
      }
    }
    l1_.AbortWrite(unused);
    l1_.Unpin(unpin);
  }
  // Phase-1 unlock: every lock outside the plan, and on keys L1 already has.
  for (size_t a = 0; a < adapters; ++a) {
    if (found[a].empty()) continue;
    std::vector<uint8_t> drop(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const bool in_plan = i / ranks < plan && !present[i] && from[i] == static_cast<int>(a);
      drop[i] = found[a][i] && !in_plan;
    }
    Unlock(a, *names, drop);
  }
  if (plan == 0) return {};

  // 4. Load each adapter's share straight into the staging objects.
  const size_t m = plan * ranks;
  std::vector<uint8_t> loaded(m, 0), abandoned(m, 0);
  {
    std::vector<std::shared_ptr<AdapterShare>> share(adapters);
    std::vector<std::shared_ptr<Tracked>> t(adapters);
    for (size_t i = 0; i < m; ++i) {
      if (present[i]) {
        loaded[i] = 1;
        continue;
      }
      auto& s = share[from[i]];
      if (!s) s = std::make_shared<AdapterShare>();
      const size_t r = i % ranks, c = i / ranks;
      s->index.push_back(i);
      s->names.push_back((*names)[i]);
      s->keys.push_back(keys[r][c]);
      s->dst.push_back({slots[r][c].data, sizes[r]});
    }
    for (size_t a = 0; a < adapters; ++a) {
      if (!share[a]) continue;
      auto s = share[a];
      t[a] = Submit(
          l2_, a, ConnectorOp::kLoad, [&](Connector& c) { return c.SubmitLoad(s->names, s->dst); },
          [this, a, s](const Completion&) {
            l2_.adapter(a).Unlock(s->names);
            l1_.AbortWrite(s->keys);
          });
    }
    for (size_t a = 0; a < adapters; ++a) {
      if (!t[a]) continue;
      const AdapterShare& s = *share[a];
      auto c = Wait(*t[a], WaitLimit(l2_, a), l2_.name(a));
      if (!c) {
        for (size_t i : s.index) abandoned[i] = 1;  // the late completion cleans up
        continue;
      }
      for (size_t j = 0; j < s.index.size() && j < c->results.size(); ++j) {
        loaded[s.index[j]] = c->results[j];
      }
      l2_.adapter(a).Unlock(s.names);  // phase-2 unlock
    }
  }

  // 5. Publish: the leading complete chunks pinned, loaded keys after a gap unpinned.
  size_t ok = 0;
  auto chunk_loaded = [&](size_t c) {
    for (size_t r = 0; r < ranks; ++r) {
      if (!loaded[c * ranks + r]) return false;
    }
    return true;
  };
  while (ok < plan && chunk_loaded(ok)) ++ok;
  L2PrefetchResult out;
  out.chunks = ok;
  std::vector<ObjectKey> publish_pinned, rest_loaded, failed, rest_present;
  for (size_t i = 0; i < m; ++i) {
    if (abandoned[i]) continue;
    const ObjectKey& k = key_at(i);
    if (i < ok * ranks) {
      out.pinned.push_back(k);
      if (!present[i]) publish_pinned.push_back(k);
    } else if (present[i]) {
      rest_present.push_back(k);
    } else {
      (loaded[i] ? rest_loaded : failed).push_back(k);
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
