// Backend limits for `bench l2`. The fs limit writes and reads files of the value size with
// plain system calls in the adapter's own directory (same filesystem, same flags: fsync and
// O_DIRECT when the adapter uses them), so the connector's GB/s can be read as a share of what
// the filesystem gives a program that does nothing else.
#include "bench/l2/l2_limits.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bench/common/report_json.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "bench/common/touched_memory.h"
#include "common/memfd.h"

namespace kvtier::bench {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kRawBytes = 256ULL << 20;  // beyond L3, so the reads are DRAM-bound
constexpr uint32_t kMinFiles = 4;
constexpr int kPasses = 3;  // of writes, then of reads
constexpr uint64_t kDirectAlign = 4096;

bool BoolKey(const nlohmann::json& backend, const char* key) {
  auto it = backend.find(key);
  return it != backend.end() && it->is_boolean() && it->get<bool>();
}

Status Errno(const char* what, const fs::path& p) {
  return Status(Code::kIoError, fmt::format("{} {}: {}", what, p.string(), std::strerror(errno)));
}

Status WriteFile(const fs::path& p, const uint8_t* data, uint64_t size, int extra_flags,
                 bool sync) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) return Errno("open", p);
  for (uint64_t done = 0; done < size;) {
    const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) {
      Status s = Errno("write", p);
      ::close(fd);
      return s;
    }
    done += static_cast<uint64_t>(w);
  }
  if (sync && ::fsync(fd) != 0) {
    Status s = Errno("fsync", p);
    ::close(fd);
    return s;
  }
  return ::close(fd) == 0 ? Status::Ok() : Errno("close", p);
}

Status ReadFile(const fs::path& p, uint8_t* data, uint64_t size, int extra_flags) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | extra_flags);
  if (fd < 0) return Errno("open", p);
  for (uint64_t done = 0; done < size;) {
    const ssize_t r = ::pread(fd, data + done, size - done, static_cast<off_t>(done));
    if (r <= 0) {
      Status s = r == 0 ? Status(Code::kIoError, "short read of " + p.string()) : Errno("read", p);
      ::close(fd);
      return s;
    }
    done += static_cast<uint64_t>(r);
  }
  ::close(fd);
  return Status::Ok();
}

struct RawRates {
  std::vector<double> write, read_one, read_distinct;  // GB/s per pass
};

// kPasses write passes (each into new files: the previous pass's files are unlinked first),
// then kPasses read passes of the last pass's files into one buffer, then kPasses into one
// buffer per file. The first write pass is usually the slowest: on this VM, page-cache pages the
// guest has not used recently cost far more than recycled ones, and the connector, which stores
// after the bench has freed files, mostly sees recycled ones. One buffer stays in the CPU cache;
// one per file is what the connector does (into L1 or the bench's load buffers).
Status RawFileIo(const fs::path& dir, uint32_t files, uint64_t size, bool direct, bool sync,
                 RawRates& out) {
  auto buf = MappedFile::Create("kvtier-bench-l2-raw", size, /*prefault=*/true, false);
  if (!buf.ok()) return buf.status();
  auto slots = MappedFile::Create("kvtier-bench-l2-raw-slots", size * files, true, false);
  if (!slots.ok()) return slots.status();
  KVT_RETURN_IF_ERROR(KernelTouch(buf->data(), buf->size()));
  KVT_RETURN_IF_ERROR(KernelTouch(slots->data(), slots->size()));
  std::memset(buf->data(), 0x5A, size);  // not zero pages: some filesystems treat those apart
  const int flags = direct ? O_DIRECT : 0;
  const double bytes = static_cast<double>(size) * files;
  for (int pass = 0; pass < kPasses; ++pass) {
    if (pass > 0) {
      for (uint32_t i = 0; i < files; ++i) ::unlink((dir / std::to_string(i)).c_str());
    }
    const auto t0 = BenchClock::now();
    for (uint32_t i = 0; i < files; ++i) {
      KVT_RETURN_IF_ERROR(WriteFile(dir / std::to_string(i), buf->data(), size, flags, sync));
    }
    out.write.push_back(bytes / 1e9 / SecondsSince(t0));
  }
  for (int distinct = 0; distinct < 2; ++distinct) {
    for (int pass = 0; pass < kPasses; ++pass) {
      const auto t0 = BenchClock::now();
      for (uint32_t i = 0; i < files; ++i) {
        uint8_t* dst = distinct ? slots->data() + size_t{i} * size : buf->data();
        KVT_RETURN_IF_ERROR(ReadFile(dir / std::to_string(i), dst, size, flags));
      }
      (distinct ? out.read_distinct : out.read_one)
          .push_back(bytes / 1e9 / SecondsSince(t0));
    }
  }
  return Status::Ok();
}

// {"passes": GB/s in pass order, "median", "min", "max"}.
nlohmann::json Passes(const std::vector<double>& in_order) {
  nlohmann::json j = SpreadJson(SpreadOf(in_order));
  j["passes"] = in_order;
  return j;
}

L2Limit FsLimit(const AdapterConfig& config, uint64_t value_size, uint32_t keys) {
  L2Limit out;
  auto path = config.backend.find("path");
  if (path == config.backend.end() || !path->is_string()) {
    out.unavailable = "the adapter has no \"path\"";
    return out;
  }
  const bool sync = BoolKey(config.backend, "fsync");
  // O_DIRECT needs aligned lengths; the connector then falls back to buffered I/O too.
  const bool direct = BoolKey(config.backend, "use_odirect") && value_size % kDirectAlign == 0;
  const uint32_t files = static_cast<uint32_t>(
      std::min<uint64_t>(keys, std::max<uint64_t>(kMinFiles, kRawBytes / value_size)));
  const fs::path dir =
      fs::path(path->get<std::string>()) / fmt::format("kvtier-bench-l2-raw-{}", ::getpid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    out.unavailable = fmt::format("cannot create {}: {}", dir.string(), ec.message());
    return out;
  }
  struct statfs sf {};
  const bool tmpfs = ::statfs(dir.c_str(), &sf) == 0 && sf.f_type == TMPFS_MAGIC;

  RawRates rates;
  Status s = RawFileIo(dir, files, value_size, direct, sync, rates);
  fs::remove_all(dir, ec);
  if (!s.ok()) {
    out.unavailable = "raw file I/O failed: " + s.ToString();
    return out;
  }
  out.store_name = fmt::format("raw write(){}, 1 thread{}", sync ? "+fsync" : "",
                               direct ? ", O_DIRECT" : "");
  out.load_name = direct ? "raw pread(), 1 thread, O_DIRECT" : "raw pread(), 1 thread, warm";
  out.store_gbps = SpreadOf(rates.write).median;
  out.load_gbps = SpreadOf(rates.read_one).median;
  out.details = {{"dir", dir.string()},
                 {"tmpfs", tmpfs},
                 {"files", files},
                 {"bytes_per_file", value_size},
                 {"fsync", sync},
                 {"o_direct", direct},
                 {"write_gbps", Passes(rates.write)},
                 {"read_one_buffer_gbps", Passes(rates.read_one)},
                 {"read_distinct_buffers_gbps", Passes(rates.read_distinct)}};
  return out;
}

}  // namespace

L2Limit MeasureL2Limit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                       uint32_t inflight) {
  if (config.options.type == "fs") return FsLimit(config, value_size, keys);
  if (config.options.type == "resp") return MeasureRedisLimit(config, value_size, keys, inflight);
  L2Limit out;
  out.unavailable =
      fmt::format("no backend limit for type '{}' (memcpy applies)", config.options.type);
  return out;
}

}  // namespace kvtier::bench
