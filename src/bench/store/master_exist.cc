// The master's batch Exist rate, measured in a forked child (master_exist.h).
#include "bench/store/master_exist.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "bench/common/child_process.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "store/client/master_client.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr uint32_t kDistinctBatches = 16;
constexpr uint32_t kWarmupCalls = 50;

struct Batch {
  std::vector<std::string> keys;
  std::vector<bool> expected;
};

std::vector<Batch> MakeBatches(const ExistPlan& plan) {
  std::vector<Batch> out(kDistinctBatches);
  for (uint32_t b = 0; b < kDistinctBatches; ++b) {
    for (uint32_t i = 0; i < plan.batch; ++i) {
      const bool present = i % 2 == 0 && !plan.present.empty();
      out[b].keys.push_back(present ? plan.present[(b * plan.batch + i) / 2 % plan.present.size()]
                                    : fmt::format("{}-{}-{}", plan.missing_prefix, b, i));
      out[b].expected.push_back(present);
    }
  }
  return out;
}

struct ThreadTally {
  std::vector<double> call_us;
  uint64_t checked = 0;
  uint64_t wrong = 0;
  std::vector<std::string> errors;
};

// One call; answers compared with what each key should be.
void Call(store::MasterApi& master, const Batch& b, ThreadTally& t) {
  const auto t0 = BenchClock::now();
  std::vector<Result<bool>> r = master.Exist(b.keys);
  t.call_us.push_back(MicrosSince(t0));
  if (r.size() != b.keys.size()) {
    AddError(t.errors, fmt::format("exist: {} answers for {} keys", r.size(), b.keys.size()));
    return;
  }
  for (size_t i = 0; i < r.size(); ++i) {
    if (!r[i].ok()) {
      AddError(t.errors, "exist: " + r[i].status().ToString());
      continue;
    }
    ++t.checked;
    if (*r[i] != b.expected[i]) ++t.wrong;
  }
}

json Measure(const ExistPlan& plan) {
  auto master = store::ConnectMaster({plan.master_address, std::chrono::milliseconds(5000)});
  const std::vector<Batch> batches = MakeBatches(plan);
  ThreadTally warm;
  for (uint32_t i = 0; i < kWarmupCalls; ++i) Call(*master, batches[i % batches.size()], warm);
  json runs = json::array();
  uint64_t checked = 0, wrong = warm.wrong;
  std::vector<std::string> errors = warm.errors;
  for (uint32_t threads : plan.threads) {
    std::vector<ThreadTally> tallies(threads);
    std::atomic<bool> go{false};
    const auto length = std::chrono::duration_cast<BenchClock::duration>(
        std::chrono::duration<double>(plan.seconds));
    BenchClock::time_point start, deadline;
    std::vector<std::thread> pool;
    for (uint32_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (uint32_t i = t; BenchClock::now() < deadline; ++i) {
          Call(*master, batches[i % batches.size()], tallies[t]);
        }
      });
    }
    start = BenchClock::now();
    deadline = start + length;
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    const double seconds = SecondsSince(start);
    std::vector<double> all;
    for (ThreadTally& t : tallies) {
      all.insert(all.end(), t.call_us.begin(), t.call_us.end());
      checked += t.checked;
      wrong += t.wrong;
      for (auto& e : t.errors) {
        AddError(errors, std::move(e));
      }
    }
    const Distribution d = DistributionOf(std::move(all));
    runs.push_back({{"threads", threads},
                    {"calls", d.count},
                    {"seconds", seconds},
                    {"p50_us", d.p50},
                    {"p99_us", d.p99}});
  }
  return {{"runs", runs}, {"checked_keys", checked}, {"wrong_answers", wrong}, {"errors", errors}};
}

}  // namespace

ExistSection MeasureMasterExist(const ExistPlan& plan) {
  ExistSection out;
  out.batch_keys = plan.batch;
  out.present_keys = plan.present.size();
  const auto limit = std::chrono::seconds(60) +
                     std::chrono::milliseconds(static_cast<int64_t>(
                         plan.seconds * 1000 * static_cast<double>(plan.threads.size())));
  auto [reply, code] = RunJsonChild([&plan] { return Measure(plan); },
                                    std::chrono::duration_cast<std::chrono::milliseconds>(limit));
  if (code != 0 && reply.ok()) {
    out.errors.push_back(fmt::format("exist process exited with code {}", code));
  }
  if (!reply.ok()) {
    out.errors.push_back(reply.status().ToString());
    return out;
  }
  for (const json& r : (*reply)["runs"]) {
    out.runs.push_back({r["threads"].get<uint32_t>(), r["calls"].get<uint64_t>(),
                        r["seconds"].get<double>(), r["p50_us"].get<double>(),
                        r["p99_us"].get<double>()});
  }
  out.checked_keys = (*reply)["checked_keys"].get<uint64_t>();
  out.wrong_answers = (*reply)["wrong_answers"].get<uint64_t>();
  for (const auto& e : (*reply)["errors"]) out.errors.push_back(e.get<std::string>());
  return out;
}

}  // namespace kvtier::bench
