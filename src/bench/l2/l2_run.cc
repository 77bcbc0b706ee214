// The two phases of `bench l2` against one connector, through an L2Driver (l2_driver.h).
#include "bench/l2/l2_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "bench/common/data_pattern.h"
#include "bench/common/timing.h"
#include "bench/l2/l2_driver.h"

namespace kvtier::bench {

namespace {

constexpr uint32_t kPhase1 = 1, kPhase2 = 2, kWarmUp = 3;
constexpr size_t kRemoveBatch = 64;

class Runner {
 public:
  Runner(Connector& c, const L2Workload& w, const BenchL2Options& o, const L2ProgressFn& progress,
         L2AdapterRun& out)
      : conn_(c),
        d_(c),
        w_(w),
        o_(o),
        progress_(progress),
        out_(out),
        stored_{std::vector<bool>(w.keys()), std::vector<bool>(w.keys()),
                std::vector<bool>(w.keys())} {}

  void Run(uint32_t rounds) {
    if (o_.warm_up) WarmUp();
    if (ok()) Phase1(rounds);
    if (ok()) QuietProbes(rounds);
    RemoveStored(kPhase1);
    if (ok()) StoreAll();
    if (ok()) LoadAll();
    RemoveStored(kPhase2);
    d_.Shutdown();
  }

 private:
  bool ok() const { return out_.errors.empty(); }
  void Fail(std::string e) { out_.errors.push_back(std::move(e)); }

  std::optional<L2Event> Next() {
    auto e = d_.Next();
    if (!e) {
      stuck_ = true;
      Fail(fmt::format("{}: no completion within deadline_ms + {} s; the connector is stuck",
                       out_.adapter_json, kL2StuckGrace.count()));
    }
    return e;
  }

  void Record(L2OpSamples& s, const L2Event& e) {
    s.seconds.push_back(SecondsBetween(e.submitted, e.done));
    s.connector_seconds.push_back(std::chrono::duration<double>(e.c.latency).count());
    s.keys += e.c.results.size();
    s.bytes += e.c.bytes;
  }

  bool CheckOk(const L2Event& e, const char* what, uint32_t phase) {
    if (e.c.status.ok() && e.c.Hits() == e.c.results.size()) return true;
    Fail(fmt::format("{} of {} (phase {}): {}", what, w_.Key(phase, e.index), phase,
                     e.c.status.ok() ? "missed a key that was stored" : e.c.status.ToString()));
    return false;
  }

  void OnStore(const L2Event& e, uint32_t phase, L2OpSamples& s) {
    Record(s, e);
    if (CheckOk(e, "store", phase)) stored_[phase - 1][e.index] = true;
  }

  void SubmitWrite(uint32_t phase, uint32_t i) {
    std::string key = w_.Key(phase, i);
    const ConstBuffer src{w_.Value(i), w_.value_size()};
    d_.Submit(ConnectorOp::kWrite, i,
              [&key, src](Connector& c) { return c.SubmitWrite({std::move(key)}, {src}); });
  }

  void SubmitLoad(uint32_t phase, uint32_t i) {
    std::string key = w_.Key(phase, i);
    const MutableBuffer dst{w_.LoadSlot(i), w_.value_size()};
    d_.Submit(ConnectorOp::kLoad, i,
              [&key, dst](Connector& c) { return c.SubmitLoad({std::move(key)}, {dst}); });
  }

  void Verify(uint32_t phase, uint32_t i) {
    if (const int64_t bad = w_.Check(w_.LoadSlot(i), i); bad >= 0) {
      Fail(fmt::format("load of {} (phase {}) returned wrong data: first bad byte at offset {}",
                       w_.Key(phase, i), phase, bad));
    } else {
      out_.verified_bytes += w_.value_size();
    }
  }

  // Waits for the completion of `op`, booking phase-1 store completions that arrive meanwhile.
  // It keeps waiting after a failed store: a lookup left in flight would keep its keys locked.
  std::optional<L2Event> Await(ConnectorOp op, uint32_t& pending_stores) {
    for (;;) {
      auto e = Next();
      if (!e) return std::nullopt;
      if (e->c.op == op) return e;
      OnStore(*e, kPhase1, out_.store);
      --pending_stores;
    }
  }

  // One lookup of `lookup_batch` keys stored before, then a load of one; `quiet` books them as
  // the baseline (no store in flight) instead of phase 1.
  void Probe(SplitMix& rng, uint32_t stored, uint32_t& pending_stores, bool quiet = false) {
    const bool during = pending_stores > 0;
    L2OpSamples& lookups = quiet ? out_.quiet_lookup : out_.lookup;
    L2OpSamples& loads = quiet ? out_.quiet_load : out_.load;
    std::vector<std::string> keys;
    for (uint32_t k = 0; k < o_.lookup_batch; ++k) {
      keys.push_back(w_.Key(kPhase1, static_cast<uint32_t>(rng.Below(stored))));
    }
    d_.Submit(ConnectorOp::kLookup, 0, [&keys](Connector& c) { return c.SubmitLookup(keys); });
    auto lookup = Await(ConnectorOp::kLookup, pending_stores);
    if (!lookup) return;
    Record(lookups, *lookup);
    // Lookups lock what they find; a lock left behind would keep the key from being removed.
    std::vector<std::string> found;
    for (size_t k = 0; k < keys.size() && k < lookup->c.results.size(); ++k) {
      if (lookup->c.results[k]) found.push_back(keys[k]);
    }
    conn_.Unlock(found);
    if (!lookup->c.status.ok() || found.size() != keys.size()) {
      Fail(fmt::format("lookup of {} keys stored in earlier rounds found {}{}", keys.size(),
                       found.size(),
                       lookup->c.status.ok() ? "" : ": " + lookup->c.status.ToString()));
      return;
    }
    const uint32_t i = static_cast<uint32_t>(rng.Below(stored));
    SubmitLoad(kPhase1, i);
    auto load = Await(ConnectorOp::kLoad, pending_stores);
    if (!load) return;
    Record(loads, *load);
    if (!CheckOk(*load, "load", kPhase1)) return;
    Verify(kPhase1, i);
    if (quiet) return;
    ++out_.probes;
    if (during) ++out_.probes_during_stores;
  }

  // The baseline: as many probes as phase 1 made during its bursts (at least 200), with every
  // store completed, so the isolation ratio compares like with like.
  void QuietProbes(uint32_t rounds) {
    const uint32_t stored = rounds * o_.stores_per_round;
    if (stored == 0) return;
    progress_("phase 1: probes with no store in flight");
    SplitMix rng(Mix(o_.seed, 0x9E7));
    uint32_t none = 0;
    const uint64_t n = std::max<uint64_t>(200, out_.probes_during_stores);
    for (uint64_t k = 0; k < n && ok(); ++k) Probe(rng, stored, none, /*quiet=*/true);
  }

  // Each round: a burst of single-key stores, and lookup+load probes of older keys while the
  // burst is in flight (at least one pair per round, once there is something to probe).
  void Phase1(uint32_t rounds) {
    SplitMix rng(Mix(o_.seed, 0x1A7E5));
    out_.rounds = rounds;
    for (uint32_t r = 0; r < rounds && ok(); ++r) {
      if (r % 16 == 0)
        progress_(fmt::format("phase 1 (store bursts + probes): round {}/{}", r, rounds));
      const uint32_t base = r * o_.stores_per_round;
      for (uint32_t k = 0; k < o_.stores_per_round; ++k) SubmitWrite(kPhase1, base + k);
      uint32_t pending = o_.stores_per_round;
      if (base > 0) {
        do {
          Probe(rng, base, pending);
        } while (pending > 0 && ok());
      }
      while (pending > 0 && ok()) {
        auto e = Next();
        if (!e) return;
        OnStore(*e, kPhase1, out_.store);
        --pending;
      }
    }
  }

  // Phase 2: every key once, `inflight` single-key tasks at a time, as the store controller and
  // the prefetcher keep a bounded number of tasks in flight.
  void Pass(ConnectorOp op, L2Pass& pass, uint32_t phase = kPhase2) {
    const uint32_t n = w_.keys();
    const char* name = op == ConnectorOp::kWrite ? "store" : "load";
    uint32_t next = 0, done = 0;
    const BenchClock::time_point t0 = BenchClock::now();
    BenchClock::time_point last = t0;
    while (done < n && ok()) {
      while (d_.outstanding() < o_.inflight && next < n) {
        if (op == ConnectorOp::kWrite) {
          SubmitWrite(phase, next++);
        } else {
          SubmitLoad(phase, next++);
        }
      }
      auto e = Next();
      if (!e) return;
      ++done;
      last = e->done;
      if (op == ConnectorOp::kWrite) {
        OnStore(*e, phase, pass.ops);
      } else {
        Record(pass.ops, *e);
        CheckOk(*e, name, phase);
      }
      if (done % 64 == 0) progress_(fmt::format("phase 2: {} {}/{}", name, done, n));
    }
    pass.wall_s = SecondsBetween(t0, last);
  }

  void StoreAll() { Pass(ConnectorOp::kWrite, out_.store_all); }

  // --warm-up: every value stored and loaded once, untimed, then removed, so that memory the
  // backend maps from this process (the store node's mapping of the bench's buffers, as of the
  // server's long-lived L1) has been touched once before anything is timed.
  void WarmUp() {
    progress_("warm-up: store, load and remove every key once");
    L2Pass scratch;
    Pass(ConnectorOp::kWrite, scratch, kWarmUp);
    if (ok()) Pass(ConnectorOp::kLoad, scratch, kWarmUp);
    RemoveStored(kWarmUp);
  }

  void LoadAll() {
    w_.ClearLoadSlots();  // a load that silently wrote nothing must not pass as verified
    Pass(ConnectorOp::kLoad, out_.load_all);
    progress_("verifying every loaded byte");
    for (uint32_t i = 0; i < w_.keys() && ok(); ++i) Verify(kPhase2, i);
  }

  // Removes what this phase stored, also after a failure; a key not removed is an error, since
  // it would stay behind in the user's backend.
  void RemoveStored(uint32_t phase) {
    const std::vector<bool>& stored = stored_[phase - 1];
    std::vector<std::vector<std::string>> batches(1);
    uint64_t expected = 0;
    for (uint32_t i = 0; i < stored.size(); ++i) {
      if (!stored[i]) continue;
      if (batches.back().size() == kRemoveBatch) batches.emplace_back();
      batches.back().push_back(w_.Key(phase, i));
      ++expected;
    }
    // A failed pass may have left tasks of this phase in flight; stores among them count too.
    while (d_.outstanding() > 0 && !stuck_) {
      auto e = Next();
      if (e && e->c.op == ConnectorOp::kWrite && e->c.status.ok() && e->c.Hits() == 1) {
        if (!stored[e->index]) ++expected;
        stored_[phase - 1][e->index] = true;
        if (batches.back().size() == kRemoveBatch) batches.emplace_back();
        batches.back().push_back(w_.Key(phase, e->index));
      }
    }
    if (expected == 0) return;
    if (stuck_) {
      Fail(
          fmt::format("cleanup skipped: {} keys of phase {} stay in the backend", expected, phase));
      return;
    }
    progress_(fmt::format("removing {} keys of phase {}", expected, phase));
    for (uint32_t b = 0; b < batches.size(); ++b) {
      d_.Submit(ConnectorOp::kRemove, b,
                [&batches, b](Connector& c) { return c.SubmitRemove(batches[b]); });
    }
    uint64_t removed = 0;
    std::string first_error;
    for (size_t b = 0; b < batches.size(); ++b) {
      auto e = Next();
      if (!e) break;
      Record(out_.remove, *e);
      removed += e->c.Hits();
      if (!e->c.status.ok() && first_error.empty()) first_error = ": " + e->c.status.ToString();
    }
    if (removed != expected) {
      Fail(fmt::format("cleanup: removed {} of the {} keys phase {} stored{}", removed, expected,
                       phase, first_error));
    }
  }

  Connector& conn_;
  L2Driver d_;
  const L2Workload& w_;
  const BenchL2Options& o_;
  const L2ProgressFn& progress_;
  L2AdapterRun& out_;
  std::vector<bool> stored_[3];  // per phase: keys whose store succeeded
  bool stuck_ = false;           // a completion never came: waiting again is pointless
};

}  // namespace

void RunL2Adapter(Connector& connector, const L2Workload& w, const BenchL2Options& o,
                  uint32_t rounds, const L2ProgressFn& progress, L2AdapterRun& out) {
  Runner(connector, w, o, progress, out).Run(rounds);
}

}  // namespace kvtier::bench
