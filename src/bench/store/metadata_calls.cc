// One client's metadata calls, timed and checked (metadata_calls.h).
#include "bench/store/metadata_calls.h"

#include <fmt/format.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "bench/store/store_results.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr uint32_t kBatch = kMetadataBatchKeys;
constexpr uint32_t kExistBatches = 8;  // distinct exists(32) batches, taken in turn

enum CallRow {
  kExists1,
  kExists32,
  kGetSize1,
  kPut1,
  kRemove1,
  kPut32,
  kRemove32,
  kPutStart1,  // the rows from here on are the MasterApi's
  kPutEnd1,
  kPutStart32,
  kPutEnd32,
  kRows
};

struct RowSpec {
  const char* op;
  uint32_t keys;
};

constexpr RowSpec kRowSpecs[kRows] = {
    {"exists", 1},  {"exists", kBatch},    {"get-size", 1},    {"put", 1},
    {"remove", 1},  {"put", kBatch},       {"remove", kBatch}, {"put-start", 1},
    {"put-end", 1}, {"put-start", kBatch}, {"put-end", kBatch}};

class Calls {
 public:
  Calls(const MetadataCallsSpec& spec, store::StoreClient& client, uint8_t* values,
        store::MasterApi* master)
      : spec_(spec),
        client_(client),
        master_(master),
        writer_id_(fmt::format("{}-bench-writer-{}", spec.client, ::getpid())) {
    for (uint32_t i = 0; i < kBatch; ++i) {
      buffers_.push_back(values + uint64_t{i} * spec.value_bytes);
      sizes_.push_back(spec.value_bytes);
      present_.push_back(fmt::format("{}-present-{}", spec.client, i));
    }
    // Half of each batch exists: even positions name a present key, odd ones a missing key.
    for (uint32_t b = 0; b < kExistBatches; ++b) {
      std::vector<std::string> keys;
      std::vector<bool> expected;
      for (uint32_t i = 0; i < kBatch; ++i) {
        const bool present = i % 2 == 0;
        keys.push_back(present ? present_[(i / 2 + b) % kBatch]
                               : fmt::format("{}-missing-{}-{}", spec.client, b, i));
        expected.push_back(present);
      }
      exist_keys_.push_back(std::move(keys));
      exist_expected_.push_back(std::move(expected));
    }
  }

  json Run() {
    std::vector<Status> put = client_.BatchPutFrom(present_, buffers_, sizes_);
    if (Check("put (the keys that exist)", present_, put)) {
      for (uint32_t n = 0; n < spec_.warmup_calls + spec_.calls; ++n) {
        timed_ = n >= spec_.warmup_calls;
        Round(n);
        if (errors_.size() >= kMaxErrors) break;
      }
    }
    // The get-size calls leased the keys that exist: force their removal.
    Check("remove (the keys that exist)", present_, client_.BatchRemove(present_, true));
    json rows = json::array();
    for (int r = 0; r < kRows; ++r) {
      if (r >= kPutStart1 && master_ == nullptr) break;
      const Distribution d = DistributionOf(std::move(us_[r]));
      rows.push_back({{"client", r >= kPutStart1 ? "master" : spec_.client},
                      {"op", kRowSpecs[r].op},
                      {"keys", kRowSpecs[r].keys},
                      {"calls", d.count},
                      {"p50_us", d.p50},
                      {"p99_us", d.p99},
                      {"mean_us", d.mean},
                      {"max_us", d.max}});
    }
    return {{"rows", rows},
            {"checked_answers", checked_},
            {"wrong_answers", wrong_},
            {"errors", errors_}};
  }

 private:
  // One call of every row. Keys and argument vectors are built before each timed call.
  void Round(uint32_t n) {
    const bool one_present = n % 2 == 0;
    Exists(kExists1,
           {one_present ? present_[n / 2 % kBatch]
                        : fmt::format("{}-missing-1-{}", spec_.client, n % 16)},
           {one_present});
    Exists(kExists32, exist_keys_[n % kExistBatches], exist_expected_[n % kExistBatches]);
    GetSize(present_[n % kBatch]);
    PutAndRemove(n, 1, kPut1, kRemove1);
    PutAndRemove(n, kBatch, kPut32, kRemove32);
    if (master_ != nullptr) {
      MasterPut(n, 1, kPutStart1, kPutEnd1);
      MasterPut(n, kBatch, kPutStart32, kPutEnd32);
    }
  }

  template <typename F>
  auto Time(CallRow row, F&& f) {
    const auto t0 = BenchClock::now();
    auto r = f();
    if (timed_) us_[row].push_back(MicrosSince(t0));
    return r;
  }

  std::vector<std::string> Keys(const char* what, uint32_t n, uint32_t count) const {
    std::vector<std::string> keys;
    for (uint32_t i = 0; i < count; ++i) {
      keys.push_back(fmt::format("{}-{}{}-{}-{}", spec_.client, what, count, n, i));
    }
    return keys;
  }

  void Exists(CallRow row, const std::vector<std::string>& keys,
              const std::vector<bool>& expected) {
    std::vector<Result<bool>> r = Time(row, [&] { return client_.BatchIsExist(keys); });
    if (r.size() != keys.size()) {
      AddError(errors_, fmt::format("exists: {} answers for {} keys", r.size(), keys.size()));
      return;
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (!r[i].ok()) {
        AddError(errors_, fmt::format("exists '{}': {}", keys[i], r[i].status().ToString()));
        continue;
      }
      ++checked_;
      if (*r[i] != expected[i]) {
        ++wrong_;
        AddError(errors_, fmt::format("exists '{}' answered {}", keys[i], *r[i]));
      }
    }
  }

  void GetSize(const std::string& key) {
    Result<uint64_t> r = Time(kGetSize1, [&] { return client_.GetSize(key); });
    if (!r.ok()) {
      AddError(errors_, fmt::format("get-size '{}': {}", key, r.status().ToString()));
      return;
    }
    ++checked_;
    if (*r != spec_.value_bytes) {
      ++wrong_;
      AddError(errors_,
               fmt::format("get-size '{}' answered {}, not {}", key, *r, spec_.value_bytes));
    }
  }

  // Puts fresh keys, then removes them (they hold no lease, so the remove must succeed).
  void PutAndRemove(uint32_t n, uint32_t count, CallRow put, CallRow remove) {
    const std::vector<std::string> keys = Keys("put", n, count);
    const std::vector<void*> buffers(buffers_.begin(), buffers_.begin() + count);
    const std::vector<size_t> sizes(sizes_.begin(), sizes_.begin() + count);
    if (!Check("put", keys,
               Time(put, [&] { return client_.BatchPutFrom(keys, buffers, sizes); }))) {
      return;
    }
    Check("remove", keys, Time(remove, [&] { return client_.BatchRemove(keys, false); }));
  }

  // The master's two put calls alone, under a writer id of its own; the object is published
  // with no bytes written (nothing reads it) and removed again, untimed.
  void MasterPut(uint32_t n, uint32_t count, CallRow start, CallRow end) {
    const std::vector<std::string> keys = Keys("master-put", n, count);
    const std::vector<uint64_t> sizes(count, spec_.value_bytes);
    auto started = Time(start, [&] { return master_->PutStart(writer_id_, keys, sizes, {}); });
    std::vector<Status> st;
    for (auto& r : started) {
      st.push_back(!r.ok() ? r.status()
                   : r->empty()
                       ? store::StoreError(store::ErrorCode::INTERNAL_ERROR, "no replica allocated")
                       : Status::Ok());
    }
    if (!Check("put-start", keys, st)) return;
    if (!Check("put-end", keys, Time(end, [&] { return master_->PutEnd(writer_id_, keys); }))) {
      return;
    }
    Check("remove (after put-end)", keys, master_->Remove(keys, false));
  }

  // True when there is one OK status per key.
  bool Check(const char* op, const std::vector<std::string>& keys, const std::vector<Status>& st) {
    if (st.size() != keys.size()) {
      AddError(errors_, fmt::format("{}: {} answers for {} keys", op, st.size(), keys.size()));
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < st.size(); ++i) {
      if (!st[i].ok()) {
        AddError(errors_, fmt::format("{} '{}': {}", op, keys[i], st[i].ToString()));
        ok = false;
      }
    }
    return ok;
  }

  const MetadataCallsSpec spec_;
  store::StoreClient& client_;
  store::MasterApi* master_;
  const std::string writer_id_;
  bool timed_ = false;
  std::vector<void*> buffers_;
  std::vector<size_t> sizes_;
  std::vector<std::string> present_;
  std::vector<std::vector<std::string>> exist_keys_;
  std::vector<std::vector<bool>> exist_expected_;
  std::vector<double> us_[kRows];
  uint64_t checked_ = 0;
  uint64_t wrong_ = 0;
  std::vector<std::string> errors_;
};

}  // namespace

json RunMetadataCalls(const MetadataCallsSpec& spec, store::StoreClient& client, uint8_t* values,
                      store::MasterApi* master) {
  return Calls(spec, client, values, master).Run();
}

}  // namespace kvtier::bench
