// What populating the node's mapping of a dummy's buffer at registration costs, and what the
// first put and get through that buffer gain, measured both ways in the same run with the
// node's own RegionMappings (populate on: what `kvtier node` does; off: a lazy mapping).
//
//   g++ -O2 -std=c++20 -Isrc bench/populate_on_register.cc -o /tmp/populate_on_register \
//     -Wl,--start-group build/libkvt_*.a -Wl,--end-group -lfmt -lspdlog -lpthread
//   /tmp/populate_on_register [MiB per buffer, default 64] [trials, default 5]
//
// Each trial, for on and off in turn: the "dummy" creates a memfd as kvtier's
// MooncakeHostMemAllocator does (lazy) and writes it (an engine computing KV into its pool); the
// "node" maps it (timed: registration), copies out of it into a warm segment buffer twice (first
// put, warm put) and, through a second fresh buffer the dummy has not touched, into it twice
// (first get, warm get). One thread, memcpy; the node's copier adds threads and RPC, not faults.
// The limit is a memcpy between two warm buffers of the same size, in the same run.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/memfd.h"
#include "store/node/region_mappings.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

long Faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Trial {
  double register_s, put_first, put_warm, get_first, get_warm;  // seconds
  long register_faults, put_first_faults, get_first_faults;
};

kvtier::MappedFile DummyBuffer(size_t bytes, bool written) {
  auto f = kvtier::MappedFile::Create("populate-bench", bytes, /*prefault=*/false,
                                      /*huge_pages=*/true);
  if (!f.ok()) {
    std::fprintf(stderr, "memfd: %s\n", f.status().ToString().c_str());
    std::exit(1);
  }
  if (written) std::memset(f->data(), 0x5a, bytes);
  return std::move(*f);
}

Trial RunTrial(bool populate, size_t bytes, std::vector<uint8_t>& segment) {
  const kvtier::MappedFile src = DummyBuffer(bytes, true), dst = DummyBuffer(bytes, false);
  kvtier::store::RegionMappings mappings(nullptr, populate);
  Trial t{};
  long f = Faults();
  auto start = Clock::now();
  auto s = mappings.Map(kvtier::wire::UniqueFd(::dup(src.fd())), bytes);
  auto d = mappings.Map(kvtier::wire::UniqueFd(::dup(dst.fd())), bytes);
  t.register_s = Seconds(start);
  t.register_faults = Faults() - f;
  if (!s.ok() || !d.ok()) {
    std::fprintf(stderr, "map failed\n");
    std::exit(1);
  }
  f = Faults();
  start = Clock::now();
  std::memcpy(segment.data(), (*s)->data(), bytes);
  t.put_first = Seconds(start);
  t.put_first_faults = Faults() - f;
  start = Clock::now();
  std::memcpy(segment.data(), (*s)->data(), bytes);
  t.put_warm = Seconds(start);
  f = Faults();
  start = Clock::now();
  std::memcpy((*d)->data(), segment.data(), bytes);
  t.get_first = Seconds(start);
  t.get_first_faults = Faults() - f;
  start = Clock::now();
  std::memcpy((*d)->data(), segment.data(), bytes);
  t.get_warm = Seconds(start);
  if (std::memcmp(dst.data(), src.data(), bytes) != 0) {
    std::fprintf(stderr, "bytes differ after the copies\n");
    std::exit(1);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int trials = argc > 2 ? std::atoi(argv[2]) : 5;
  if (mib == 0 || trials <= 0) {
    std::fprintf(stderr, "usage: %s [MiB per buffer > 0] [trials > 0]\n", argv[0]);
    return 2;
  }
  const size_t bytes = mib << 20;
  std::vector<uint8_t> segment(bytes, 1), other(bytes, 2);
  std::vector<double> copy;
  std::vector<Trial> on, off;
  for (int i = 0; i < trials; ++i) {
    auto start = Clock::now();
    std::memcpy(other.data(), segment.data(), bytes);
    copy.push_back(bytes / Seconds(start) / 1e9);
    // Alternate which goes first, so a drift of the machine favours neither.
    if (i % 2 == 0) {
      on.push_back(RunTrial(true, bytes, segment));
      off.push_back(RunTrial(false, bytes, segment));
    } else {
      off.push_back(RunTrial(false, bytes, segment));
      on.push_back(RunTrial(true, bytes, segment));
    }
  }
  const double gb = bytes / 1e9;
  std::printf("populate on register, %zu MiB buffers, median of %d trials; memcpy (same run) "
              "%.2f GB/s\n",
              mib, trials, Median(copy));
  std::printf("| populate | register 2 buffers, ms | faults | first put GB/s | faults | "
              "warm put GB/s | first get GB/s | faults | warm get GB/s |\n|---|---|---|---|---|"
              "---|---|---|---|\n");
  for (const auto* set : {&on, &off}) {
    auto med = [&](auto field) {
      std::vector<double> v;
      for (const Trial& t : *set) v.push_back(static_cast<double>(field(t)));
      return Median(v);
    };
    std::printf("| %s | %.1f | %.0f | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f |\n",
                set == &on ? "on (kvtier node)" : "off (lazy)",
                med([](const Trial& t) { return t.register_s * 1e3; }),
                med([](const Trial& t) { return t.register_faults; }),
                gb / med([](const Trial& t) { return t.put_first; }),
                med([](const Trial& t) { return t.put_first_faults; }),
                gb / med([](const Trial& t) { return t.put_warm; }),
                gb / med([](const Trial& t) { return t.get_first; }),
                med([](const Trial& t) { return t.get_first_faults; }),
                gb / med([](const Trial& t) { return t.get_warm; }));
  }
  return 0;
}
