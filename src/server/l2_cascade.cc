#include "server/l2_cascade.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/clock.h"
#include "common/logging.h"

namespace kvtier {
namespace {

// 100 ms, 200 ms, 400 ms ... capped at 5 s.
int64_t BackoffNs(uint32_t failures) {
  const int64_t ms = std::min<int64_t>(5000, 100LL << std::min<uint32_t>(failures - 1, 6));
  return ms * 1'000'000;
}

}  // namespace

Result<std::unique_ptr<L2Cascade>> L2Cascade::Create(const std::vector<std::string>& adapter_json,
                                                     const ConnectorRegistry& registry,
                                                     MetricsRegistry& metrics,
                                                     const ConnectorEnv& env,
                                                     Clock& clock) {
  std::vector<std::unique_ptr<L2Capacity>> adapters;
  for (size_t i = 0; i < adapter_json.size(); ++i) {
    auto cfg = ParseAdapterConfig(adapter_json[i], i);
    if (!cfg.ok()) return cfg.status();
    auto conn = registry.Create(*cfg, env);
    if (!conn.ok()) return conn.status();
    auto wrapped = L2Capacity::Create(std::move(conn).value(), metrics);
    if (!wrapped.ok()) return wrapped.status();
    // Not the JSON itself: it may hold a password.
    KVT_LOG_INFO("L2 adapter {} ready", (*wrapped)->Options().name);
    adapters.push_back(std::move(wrapped).value());
  }
  return std::unique_ptr<L2Cascade>(new L2Cascade(std::move(adapters), metrics, clock));
}

L2Cascade::L2Cascade(std::vector<std::unique_ptr<L2Capacity>> adapters, MetricsRegistry& metrics,
                     Clock& clock)
    : clock_(clock), adapters_(std::move(adapters)) {
  std::vector<Connector*> raw;
  for (auto& a : adapters_) {
    raw.push_back(a.get());
    const std::string& name = a->Options().name;
    std::array<OpMetrics, kConnectorOps> m{};
    for (ConnectorOp op : kAllConnectorOps) {
      const Labels l{{"adapter", name}, {"op", OpPoolName(op)}};
      m[static_cast<size_t>(op)] = OpMetrics{
          metrics.GetCounter("kvtier_l2_tasks_total", "L2 batch operations completed", l),
          metrics.GetCounter("kvtier_l2_failed_tasks_total",
                             "L2 batch operations that failed (backend down, deadline, error)", l),
          metrics.GetCounter("kvtier_l2_keys_total", "Keys in completed L2 operations", l),
          metrics.GetCounter("kvtier_l2_hit_keys_total",
                             "Keys found / loaded / stored / removed by L2 operations", l),
          metrics.GetCounter("kvtier_l2_bytes_total", "Bytes loaded or stored by L2 operations", l),
          metrics.GetHistogram("kvtier_l2_latency_seconds",
                               "L2 batch operation latency, submission to completion", l),
      };
    }
    metrics_.push_back(m);
    inflight_.push_back(metrics.GetGauge("kvtier_l2_inflight_bytes",
                                         "Bytes of L2 loads and stores in flight",
                                         {{"adapter", name}}));
    up_.push_back(metrics.GetGauge("kvtier_l2_adapter_up", "1 while the adapter is healthy",
                                   {{"adapter", name}}));
    up_.back()->Set(1);
    health_.push_back(std::make_unique<AdapterHealth>());
  }
  router_ = std::make_unique<CompletionRouter>(std::move(raw));
}

L2Cascade::~L2Cascade() { Close(); }

void L2Cascade::Close() {
  std::call_once(closed_, [this] {
    for (auto& a : adapters_) a->Close();
    router_->Stop();
  });
}

void L2Cascade::Submit(size_t i, ConnectorOp op, const CompletionRouter::SubmitFn& submit,
                       CompletionRouter::Callback done) {
  router_->Submit(i, op, submit, [this, i, done = std::move(done)](Completion c) {
    Record(i, c);
    done(std::move(c));
  });
  inflight_[i]->Set(static_cast<double>(adapters_[i]->Stats().inflight_bytes));
}

std::optional<Completion> L2Cascade::LookupNow(size_t i, std::vector<std::string> keys) {
  auto c = adapters_[i]->LookupNow(std::move(keys));
  if (c) Record(i, *c);
  return c;
}

std::future<Completion> L2Cascade::Submit(size_t i, ConnectorOp op,
                                          const CompletionRouter::SubmitFn& submit) {
  auto promise = std::make_shared<std::promise<Completion>>();
  auto future = promise->get_future();
  Submit(i, op, submit, [promise](Completion c) { promise->set_value(std::move(c)); });
  return future;
}

uint64_t L2Cascade::Clear(std::string_view key_prefix) {
  std::vector<std::future<Completion>> removes;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    std::vector<std::string> keys = adapters_[i]->Keys();
    std::erase_if(keys, [&](const std::string& k) { return !k.starts_with(key_prefix); });
    if (keys.empty() || !Available(i, ConnectorOp::kRemove)) continue;
    removes.push_back(Submit(i, ConnectorOp::kRemove, [&keys](Connector& c) {
      return c.SubmitRemove(std::move(keys));
    }));
  }
  uint64_t removed = 0;
  for (auto& f : removes) removed += f.get().Hits();
  return removed;
}

bool L2Cascade::Health::Available(int64_t now_ns) const {
  return up.load() || now_ns >= retry_at_ns.load();
}

bool L2Cascade::Health::MarkUp() {
  failures.store(0);
  return !up.exchange(true);
}

bool L2Cascade::Health::MarkDown(int64_t now_ns) {
  const uint32_t n = failures.fetch_add(1) + 1;
  retry_at_ns.store(now_ns + BackoffNs(n));
  return up.exchange(false);
}

bool L2Cascade::Up(size_t i) const {
  return health_[i]->all.up.load() && health_[i]->writes.up.load();
}

bool L2Cascade::Available(size_t i, ConnectorOp op) const {
  const AdapterHealth& h = *health_[i];
  const bool write = op == ConnectorOp::kWrite || op == ConnectorOp::kRemove;
  const int64_t now = clock_.NowNs();
  return h.all.Available(now) && (!write || h.writes.Available(now));
}

void L2Cascade::Record(size_t i, const Completion& c) {
  const OpMetrics& m = metrics_[i][static_cast<size_t>(c.op)];
  m.tasks->Inc();
  m.keys->Inc(static_cast<double>(c.results.size()));
  m.hits->Inc(static_cast<double>(c.Hits()));
  m.bytes->Inc(static_cast<double>(c.bytes));
  m.latency->Observe(std::chrono::duration<double>(c.latency).count());
  inflight_[i]->Set(static_cast<double>(adapters_[i]->Stats().inflight_bytes));

  std::lock_guard lock(health_mu_);
  AdapterHealth& h = *health_[i];
  const bool write = c.op == ConnectorOp::kWrite || c.op == ConnectorOp::kRemove;
  const bool was_up = Up(i);
  if (c.status.ok()) {
    h.all.MarkUp();
    if (write) h.writes.MarkUp();  // a read says nothing about room for writes
    if (!was_up && Up(i)) {
      up_[i]->Set(1);
      KVT_LOG_WARN("L2 adapter {} is back", name(i));
    }
    return;
  }
  m.failed->Inc();
  const Code code = c.status.code();
  if (code == Code::kInvalidArgument) return;  // a bad request, not a sick backend
  const bool unreachable = code == Code::kUnavailable || code == Code::kTimeout;
  if (write && !unreachable) {
    if (h.writes.MarkDown(clock_.NowNs()) && was_up) {
      up_[i]->Set(0);
      KVT_LOG_WARN("L2 adapter {} takes no writes ({} failed: {}); its stores are skipped until "
                   "one succeeds, what it holds is still read",
                   name(i), OpPoolName(c.op), c.status.message());
    }
    return;
  }
  if (h.all.MarkDown(clock_.NowNs()) && was_up) {
    up_[i]->Set(0);
    KVT_LOG_WARN("L2 adapter {} is down ({} failed: {}); its stores are skipped and its lookups "
                 "are misses until it answers again",
                 name(i), OpPoolName(c.op), c.status.message());
  }
}

nlohmann::json L2Cascade::Status() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const ConnectorStats s = adapters_[i]->Stats();
    nlohmann::json a;
    a["name"] = name(i);
    a["type"] = adapters_[i]->Options().type;
    a["up"] = Up(i);
    a["writes_up"] = health_[i]->writes.up.load();
    a["inflight_bytes"] = s.inflight_bytes;
    a["locked_keys"] = s.locked_keys;
    if (const L2Capacity::Usage u = adapters_[i]->usage(); u.accounted) {
      a["stored_bytes"] = u.bytes;
      a["stored_objects"] = u.objects;
      a["capacity_bytes"] = u.capacity_bytes;
      a["evictions"] = u.evictions;
    }
    for (ConnectorOp op : kAllConnectorOps) {
      const OpCounters& o = s.ops[static_cast<size_t>(op)];
      a[OpPoolName(op)] = {{"tasks", o.tasks},
                         {"failed_tasks", o.failed_tasks},
                         {"keys", o.keys},
                         {"hit_keys", o.hits},
                         {"bytes", o.bytes}};
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace kvtier
