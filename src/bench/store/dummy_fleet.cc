// DummyFleet (dummy_fleet.h): the child's side runs the commands "put T", "get T",
// "remove T" (the keys of trials 0..T) and "quit", each answered with one JSON line; the parent's side sends each command
// to every process before reading any answer, so their timed phases overlap.
#include "bench/store/dummy_fleet.h"

#include <fmt/format.h>

#include <algorithm>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "bench/common/data_pattern.h"
#include "bench/common/timing.h"
#include "bench/common/value_check.h"
#include "store/client/dummy_client.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr auto kSetupTimeout = std::chrono::minutes(3);
constexpr auto kPhaseTimeout = std::chrono::minutes(10);
constexpr auto kRemoveDeadline = std::chrono::seconds(30);

// The child: one dummy client and two regions of its mem pool, `src` (the values, filled once)
// and `dst` (where gets land).
class DummyChild {
 public:
  DummyChild(const DummyChildPlan& plan, std::unique_ptr<store::StoreClient> client, uint8_t* src,
              uint8_t* dst)
      : plan_(plan), client_(std::move(client)), src_(src), dst_(dst) {}

  uint64_t total() const { return uint64_t{plan_.values} * plan_.value_bytes; }

  json Put(uint32_t trial) {
    PhaseSample s;
    s.bytes = total();
    std::vector<Batch> batches = Batches(trial, src_);
    const double cpu0 = ProcessCpuSeconds();
    s.start_ns = NowNs();
    for (const Batch& b : batches) {
      const auto t0 = BenchClock::now();
      std::vector<Status> st = client_->BatchPutFrom(b.keys, b.buffers, b.sizes);
      s.batch_us.push_back(MicrosSince(t0));
      for (size_t i = 0; i < st.size(); ++i) {
        if (!st[i].ok()) AddError(s.errors, fmt::format("put '{}': {}", b.keys[i], st[i].ToString()));
      }
    }
    s.end_ns = NowNs();
    s.cpu_s = ProcessCpuSeconds() - cpu0;
    return s.ToJson();
  }

  json Get(uint32_t trial) {
    if (plan_.fill_only) return {{"error", "get in a fill-only process"}};
    PhaseSample s;
    s.bytes = total();
    std::memset(dst_, 0, total());  // so a get that writes nothing cannot pass the check
    std::vector<Batch> batches = Batches(trial, dst_);
    const double cpu0 = ProcessCpuSeconds();
    s.start_ns = NowNs();
    for (const Batch& b : batches) {
      const auto t0 = BenchClock::now();
      std::vector<Result<uint64_t>> r = client_->BatchGetInto(b.keys, b.buffers, b.sizes);
      s.batch_us.push_back(MicrosSince(t0));
      for (size_t i = 0; i < r.size(); ++i) {
        if (!r[i].ok()) {
          AddError(s.errors, fmt::format("get '{}': {}", b.keys[i], r[i].status().ToString()));
        } else if (*r[i] != plan_.value_bytes) {
          AddError(s.errors, fmt::format("get '{}': {} bytes, expected {}", b.keys[i], *r[i],
                                         plan_.value_bytes));
        }
      }
    }
    s.end_ns = NowNs();
    s.cpu_s = ProcessCpuSeconds() - cpu0;
    // Untimed: every byte against what was put.
    s.verified_bytes +=
        CompareValues(dst_, src_, plan_.values, plan_.value_bytes, [&](uint32_t i) {
          AddError(s.errors, fmt::format("value of '{}' came back different",
                                         DummyKey(plan_.key_prefix, trial, i)));
        });
    return s.ToJson();
  }

  // Removes the keys of trials 0..last, retrying keys still under a read lease until it expires.
  json Remove(uint32_t last) {
    std::vector<std::string> errors, left;
    for (uint32_t t = 0; t <= last; ++t) {
      for (uint32_t i = 0; i < plan_.values; ++i) left.push_back(DummyKey(plan_.key_prefix, t, i));
    }
    uint64_t removed = 0;
    const auto deadline = BenchClock::now() + kRemoveDeadline;
    while (!left.empty()) {
      std::vector<std::string> leased;
      for (std::string& key : left) {
        Status st = client_->Remove(key);
        if (st.ok()) {
          ++removed;
        } else if (store::ErrorCodeOf(st) == store::ErrorCode::OBJECT_HAS_LEASE &&
                   BenchClock::now() < deadline) {
          leased.push_back(std::move(key));
        } else {
          AddError(errors, fmt::format("remove '{}': {}", key, st.ToString()));
        }
      }
      left.swap(leased);
      if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return {{"removed", removed}, {"errors", errors}};
  }

  void Close() { (void)client_->Close(); }

 private:
  struct Batch {
    std::vector<std::string> keys;
    std::vector<void*> buffers;
    std::vector<size_t> sizes;
  };

  // Built before the timer starts: only the calls are timed.
  std::vector<Batch> Batches(uint32_t trial, uint8_t* base) const {
    std::vector<Batch> out;
    for (uint32_t first = 0; first < plan_.values; first += plan_.batch) {
      Batch b;
      for (uint32_t i = first; i < std::min(plan_.values, first + plan_.batch); ++i) {
        b.keys.push_back(DummyKey(plan_.key_prefix, trial, i));
        b.buffers.push_back(plan_.fill_only ? base : base + uint64_t{i} * plan_.value_bytes);
        b.sizes.push_back(plan_.value_bytes);
      }
      out.push_back(std::move(b));
    }
    return out;
  }

  DummyChildPlan plan_;
  std::unique_ptr<store::StoreClient> client_;
  uint8_t* src_;
  uint8_t* dst_;
};

Result<std::unique_ptr<DummyChild>> SetUp(const DummyChildPlan& plan) {
  const uint64_t total =
      plan.fill_only ? plan.value_bytes : uint64_t{plan.values} * plan.value_bytes;
  const uint64_t region = (total + 4095) / 4096 * 4096;
  const int regions = plan.fill_only ? 1 : 2;  // src, dst
  store::DummyOptions o;
  o.server_address = plan.node_address;
  o.mem_pool_size = regions * region;
  o.local_buffer_size = 0;  // Put/Get (the copying calls) are not used
  auto client = store::ConnectDummy(o);
  if (!client.ok()) return Status(Code::kUnavailable, "connect: " + client.status().ToString());
  uint8_t* buf[2] = {nullptr, nullptr};
  for (int r = 0; r < regions; ++r) {
    auto p = (*client)->AllocFromMemPool(region);
    if (!p.ok()) return Status(Code::kOutOfMemory, "alloc_from_mem_pool: " + p.status().ToString());
    buf[r] = static_cast<uint8_t*>(*p);
    if (auto st = (*client)->RegisterBuffer(buf[r], region); !st.ok()) {
      return Status(Code::kInternal, "register_buffer: " + st.ToString());
    }
  }
  // Distinct bytes per value, so a value read from the wrong key cannot pass. Writing both
  // regions here also takes their first-touch page faults out of the timed phases.
  const uint64_t prefix_seed = Mix(plan.seed, std::hash<std::string>{}(plan.key_prefix));
  for (uint32_t i = 0; i < (plan.fill_only ? 1 : plan.values); ++i) {
    FillValue(buf[0] + uint64_t{i} * plan.value_bytes, plan.value_bytes, Mix(prefix_seed, i));
  }
  if (buf[1] != nullptr) std::memset(buf[1], 0, region);
  return std::make_unique<DummyChild>(plan, std::move(client).value(), buf[0], buf[1]);
}

int ChildMain(const DummyChildPlan& plan, int in_fd, int out_fd) {
  auto child = SetUp(plan);
  if (!child.ok()) {
    WriteLine(out_fd, json{{"error", child.status().message()}}.dump());
    return 1;
  }
  WriteLine(out_fd, json{{"ready", true}}.dump());
  std::string buffer;
  while (auto line = ReadLine(in_fd, buffer)) {
    std::istringstream in(*line);
    std::string command;
    uint32_t trial = 0;
    in >> command >> trial;
    json reply;
    if (command == "put") {
      reply = (*child)->Put(trial);
    } else if (command == "get") {
      reply = (*child)->Get(trial);
    } else if (command == "remove") {
      reply = (*child)->Remove(trial);
    } else if (command == "quit") {
      (*child)->Close();
      return 0;
    } else {
      reply = {{"error", "unknown command: " + *line}};
    }
    if (!WriteLine(out_fd, reply.dump())) return 1;
  }
  return 1;  // the parent went away
}

}  // namespace

std::string DummyKey(const std::string& prefix, uint32_t trial, uint32_t index) {
  return fmt::format("{}-t{}-{}", prefix, trial, index);
}

Result<std::unique_ptr<DummyFleet>> DummyFleet::Start(const std::vector<DummyChildPlan>& plans) {
  std::unique_ptr<DummyFleet> fleet(new DummyFleet());
  for (const DummyChildPlan& plan : plans) {
    auto child = LinkedChild::Fork([&plan](int in_fd, int out_fd) {
      return ChildMain(plan, in_fd, out_fd);
    });
    if (!child.ok()) return child.status();
    fleet->children_.push_back(std::move(child).value());
  }
  for (auto& child : fleet->children_) {
    auto ready = child->Receive(kSetupTimeout);
    if (!ready.ok()) return ready.status();
    if (ready->contains("error")) {
      return Status(Code::kUnavailable,
                    fmt::format("dummy process: {}", (*ready)["error"].get<std::string>()));
    }
  }
  return fleet;
}

DummyFleet::~DummyFleet() { (void)Stop(); }

Result<std::vector<json>> DummyFleet::Broadcast(const std::string& command) {
  for (auto& child : children_) {
    if (Status s = child->Send(command); !s.ok()) return s;
  }
  std::vector<json> out;
  for (auto& child : children_) {
    auto reply = child->Receive(kPhaseTimeout);
    if (!reply.ok()) return reply.status();
    if (reply->contains("error")) {
      return Status(Code::kInternal, fmt::format("dummy process {}: {}", child->pid(),
                                                 (*reply)["error"].get<std::string>()));
    }
    out.push_back(std::move(reply).value());
  }
  return out;
}

std::vector<pid_t> DummyFleet::pids() const {
  std::vector<pid_t> out;
  for (const auto& child : children_) out.push_back(child->pid());
  return out;
}

Status DummyFleet::RunPhase(const char* phase, uint32_t trial, std::vector<PhaseSample>& out) {
  auto replies = Broadcast(fmt::format("{} {}", phase, trial));
  if (!replies.ok()) return replies.status();
  out.clear();
  for (const json& r : *replies) out.push_back(PhaseSample::FromJson(r));
  return Status::Ok();
}

Status DummyFleet::Remove(uint32_t last_trial, std::vector<std::string>& errors) {
  auto replies = Broadcast(fmt::format("remove {}", last_trial));
  if (!replies.ok()) return replies.status();
  for (const json& r : *replies) {
    for (const auto& e : r.value("errors", std::vector<std::string>{})) errors.push_back(e);
  }
  return Status::Ok();
}

Status DummyFleet::Stop() {
  Status first = Status::Ok();
  for (auto& child : children_) {
    (void)child->Send("quit");
  }
  for (auto& child : children_) {
    const int code = child->Finish(std::chrono::seconds(10));
    if (code != 0 && first.ok()) {
      first = Status(Code::kInternal, fmt::format("dummy process {} exited with code {}",
                                                  child->pid(), code));
    }
  }
  children_.clear();
  return first;
}

}  // namespace kvtier::bench
