// The keys and values of `bench l2` (l2_workload.h).
#include "bench/l2/l2_workload.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "bench/common/data_pattern.h"
#include "bench/common/timing.h"
#include "bench/common/touched_memory.h"
#include "common/object_key.h"

namespace kvtier::bench {

namespace {

// Both buffers together may take at most this share of the machine's RAM: the backend (redis,
// the page cache, the mem map) holds another copy.
constexpr double kMaxRamShare = 0.4;

uint64_t PhysicalBytes() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

Result<L2Workload> L2Workload::Create(const BenchL2Options& o, uint64_t value_size) {
  L2Workload w;
  w.seed_ = o.seed;
  w.keys_ = o.keys;
  w.value_size_ = value_size;
  // Unique per run: leftovers of a crashed run can never be mistaken for this run's values.
  w.model_ = fmt::format("kvtier-bench-l2-{}-{:x}", ::getpid(), NowNs() & 0xFFFFFFFF);

  const uint64_t bytes = uint64_t{o.keys} * value_size;
  const uint64_t ram = PhysicalBytes();
  if (2.0 * static_cast<double>(bytes) > kMaxRamShare * static_cast<double>(ram)) {
    return Status(
        Code::kInvalidArgument,
        fmt::format("--keys x --value-size = {:.2f} GiB, and the bench keeps it twice "
                    "(values and load buffers); that is more than {:.0f}% of this "
                    "machine's {:.1f} GiB of RAM",
                    bytes / double(1ULL << 30), kMaxRamShare * 100, ram / double(1ULL << 30)));
  }
  auto values = MappedFile::Create("kvtier-bench-l2-values", bytes, /*prefault=*/true, false);
  if (!values.ok()) return values.status();
  auto loads = MappedFile::Create("kvtier-bench-l2-loads", bytes, /*prefault=*/true, false);
  if (!loads.ok()) return loads.status();
  w.values_ = std::move(values).value();
  w.loads_ = std::move(loads).value();
  KVT_RETURN_IF_ERROR(KernelTouch(w.values_.data(), w.values_.size()));
  KVT_RETURN_IF_ERROR(KernelTouch(w.loads_.data(), w.loads_.size()));

  const uint64_t aligned = value_size & ~uint64_t{7};
  for (uint32_t i = 0; i < o.keys; ++i) {
    uint8_t* v = w.values_.data() + w.Offset(i);
    FillValue(v, aligned, w.ValueSeed(i));
    if (aligned < value_size) {  // a tail shorter than one pattern word
      const uint64_t word = PatternWord(w.ValueSeed(i), 0, 0, aligned / 8);
      std::memcpy(v + aligned, &word, value_size - aligned);
    }
  }
  return w;
}

uint64_t L2Workload::ValueSeed(uint32_t index) const { return Mix(seed_, index); }

std::string L2Workload::Key(uint32_t phase, uint32_t index) const {
  ObjectKey k;
  k.model = model_;
  k.packed_rank = PackRank(1, 0);
  k.key_group = phase;
  const uint64_t h[2] = {Mix(Mix(seed_, phase), index), Mix(Mix(seed_, phase + 1000), index)};
  std::memcpy(k.hash.data(), h, sizeof(h));
  return k.ToString();
}

void L2Workload::ClearLoadSlots() const { std::memset(loads_.data(), 0, loads_.size()); }

int64_t L2Workload::Check(const uint8_t* data, uint32_t index) const {
  const uint64_t aligned = value_size_ & ~uint64_t{7};
  const int64_t bad = CheckBlock(data, aligned, ValueSeed(index), 0, 0);
  if (bad >= 0 || aligned == value_size_) return bad;
  const uint64_t word = PatternWord(ValueSeed(index), 0, 0, aligned / 8);
  const auto* want = reinterpret_cast<const uint8_t*>(&word);
  for (uint64_t b = aligned; b < value_size_; ++b) {
    if (data[b] != want[b - aligned]) return static_cast<int64_t>(b);
  }
  return -1;
}

}  // namespace kvtier::bench
