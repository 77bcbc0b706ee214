// "type":"fs": one file per key under `path` (format and naming: fs_object_file.h).
//
// Store writes header + payload to a unique temp file in the key's shard directory and publishes
// it with a no-replace rename, so a reader sees either nothing or the whole object, and the first
// writer wins even across processes sharing the directory. Load reads header and payload with one
// preadv straight into the caller's buffer and checks length, key hash and XXH3 checksum; a file
// that fails a check is removed and reads as a miss. There is no in-memory index: a key's file is
// found from the key alone, so a restarted server sees everything already on disk. At startup
// temp files older than kStaleTempAge (left by a crash) are removed.
//
// Backend keys: path (required), shard_depth [1], use_odirect [false], fsync [false]
// (docs/connectors/fs.md).
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>

#include "common/logging.h"
#include "common/printable.h"
#include "connectors/builtin_connectors.h"
#include "connectors/connector_base.h"
#include "connectors/fs_object_file.h"

namespace kvtier {
namespace {

// A temp file younger than this may belong to a live writer (another process can share the
// directory), so the startup sweep leaves it alone.
constexpr auto kStaleTempAge = std::chrono::minutes(10);
constexpr uint64_t kDirectAlign = 4096;  // O_DIRECT buffer, length and offset alignment

struct FsSettings {
  std::string path;
  uint32_t shard_depth = 1;
  bool use_odirect = false;
  bool fsync = false;
};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedPage = std::unique_ptr<uint8_t, FreeDeleter>;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close()'s error (a network filesystem may report a failed write here).
  int Close() {
    const int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes are issued in pieces of at most this (a multiple of the O_DIRECT alignment): this kernel
// does not preempt a thread inside a system call, so one 1 MiB write into the page cache keeps a
// waking lookup off its core until it returns (bench l2 lookup p99 under store bursts).
constexpr size_t kMaxWritePerCall = 128 << 10;
constexpr int kMaxWriteIov = 8;

// The first bytes of `iov`, at most kMaxWritePerCall of them, as a new iovec list in `part`.
int FirstWritePiece(const iovec* iov, int cnt, iovec* part) {
  size_t total = 0;
  int k = 0;
  for (; k < cnt && k < kMaxWriteIov && total < kMaxWritePerCall; ++k) {
    part[k] = iov[k];
    part[k].iov_len = std::min(iov[k].iov_len, kMaxWritePerCall - total);
    total += part[k].iov_len;
  }
  return k;
}

// Moves `n` bytes through the iovecs at `off` with preadv/pwritev, resuming after short transfers.
// Returns the bytes moved (fewer only at end of file when reading) or -1 with errno set.
template <bool kWrite>
ssize_t TransferAll(int fd, iovec* iov, int cnt, off_t off) {
  ssize_t done = 0;
  while (cnt > 0) {
    iovec part[kMaxWriteIov];
    const ssize_t r = kWrite ? ::pwritev(fd, part, FirstWritePiece(iov, cnt, part), off + done)
                             : ::preadv(fd, iov, cnt, off + done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) {
      if (kWrite) {
        errno = EIO;
        return -1;
      }
      break;
    }
    done += r;
    for (size_t left = static_cast<size_t>(r); left > 0 && cnt > 0;) {
      const size_t take = std::min(left, iov->iov_len);
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + take;
      iov->iov_len -= take;
      left -= take;
      if (iov->iov_len == 0) {
        ++iov;
        --cnt;
      }
    }
    while (cnt > 0 && iov->iov_len == 0) {
      ++iov;
      --cnt;
    }
  }
  return done;
}

bool Aligned(const void* p, uint64_t size) {
  return reinterpret_cast<uintptr_t>(p) % kDirectAlign == 0 && size % kDirectAlign == 0;
}

class FsConnector final : public ConnectorBase<FsConnector> {
 public:
  struct Conn {
    AlignedPage page;  // the header block, aligned for O_DIRECT
  };

  FsConnector(const ConnectorOptions& options, FsSettings settings, int root_fd)
      : ConnectorBase(options), s_(std::move(settings)), root_(root_fd) {
    nonce_ = std::random_device{}();
    nonce_ = nonce_ << 32 | std::random_device{}();
    StartThreads();
  }
  ~FsConnector() override { Close(); }

  Result<std::unique_ptr<Conn>> Connect() {
    auto c = std::make_unique<Conn>();
    c->page.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, kFsPayloadOffset)));
    if (!c->page) return Status(Code::kOutOfMemory, Name() + ": no memory for a header block");
    return c;
  }

  Status Get(Conn& c, const std::string& key, MutableBuffer dst, Deadline) {
    Result<std::string> rel = FsObjectPath(key, s_.shard_depth);
    if (!rel.ok()) return Status(Code::kNotFound, rel.status().message());
    bool refused = false;
    Status st = GetFile(c, key, *rel, dst, WantDirect(dst.data, dst.size), refused);
    if (refused) st = GetFile(c, key, *rel, dst, false, refused);
    return st;
  }

  Status Set(Conn& c, const std::string& key, ConstBuffer src, Deadline) {
    Result<std::string> rel = FsObjectPath(key, s_.shard_depth);
    if (!rel.ok()) {
      return Status(Code::kInvalidArgument, fmt::format("{}: key '{}' rejected: {}", Name(),
                                                        PrintableText(key), rel.status().message()));
    }
    struct stat sb;
    if (::fstatat(root_.get(), rel->c_str(), &sb, 0) == 0) {
      return Status(Code::kAlreadyExists, *rel);  // first writer wins: skip the write
    }
    if (errno != ENOENT && errno != ENOTDIR) return IoError("stat", *rel, errno);
    bool refused = false;
    Status st = SetFile(c, key, *rel, src, WantDirect(src.data, src.size), refused);
    if (refused) st = SetFile(c, key, *rel, src, false, refused);
    return st;
  }

  Result<bool> Exists(Conn&, const std::string& key, Deadline) {
    Result<std::string> rel = FsObjectPath(key, s_.shard_depth);
    if (!rel.ok()) return false;
    struct stat sb;
    if (::fstatat(root_.get(), rel->c_str(), &sb, 0) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return false;
      return IoError("stat", *rel, errno);
    }
    // Cheap checks only: the checksum is verified by load.
    return S_ISREG(sb.st_mode) && static_cast<uint64_t>(sb.st_size) >= kFsPayloadOffset;
  }

  Result<bool> Remove(Conn&, const std::string& key, Deadline) {
    Result<std::string> rel = FsObjectPath(key, s_.shard_depth);
    if (!rel.ok()) return false;
    if (::unlinkat(root_.get(), rel->c_str(), 0) == 0) return true;
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return IoError("unlink", *rel, errno);
  }

  // Like the default, but a rejected key fails only itself: the other keys are still stored and
  // the task reports the rejection.
  Status BatchSet(Conn& c, std::span<const std::string> keys, std::span<const ConstBuffer> src,
                  Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
    Status first_rejection;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::chrono::steady_clock::now() >= d) return DeadlinePassed();
      Status s = Set(c, keys[i], src[i], d);
      if (s.ok()) {
        bytes += src[i].size;
      } else if (s.code() == Code::kInvalidArgument) {
        if (first_rejection.ok()) first_rejection = std::move(s);
        continue;
      } else if (s.code() != Code::kAlreadyExists) {
        return s;
      }
      out[i] = 1;
    }
    return first_rejection;
  }

  // Every object file under the directory (where its key's path says it lives), oldest first.
  Result<std::vector<StoredObject>> ListStored() override {
    namespace fs = std::filesystem;
    std::vector<StoredObject> out;
    std::error_code ec;
    const fs::path root(s_.path);
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fec;
      if (it.depth() >= static_cast<int>(kFsMaxShardDepth)) it.disable_recursion_pending();
      if (!it->is_regular_file(fec)) continue;
      std::optional<std::string> key = FsKeyFromName(it->path().filename().string());
      const uint64_t size = it->file_size(fec);
      if (!key || fec || size < kFsPayloadOffset) continue;
      Result<std::string> rel = FsObjectPath(*key, s_.shard_depth);
      if (!rel.ok() || it->path().lexically_relative(root) != fs::path(*rel)) continue;
      const auto mtime = it->last_write_time(fec);
      out.push_back(StoredObject{std::move(*key), size - kFsPayloadOffset,
                                 static_cast<int64_t>(mtime.time_since_epoch().count())});
    }
    if (ec) return Status(Code::kIoError, fmt::format("{}: listing {}: {}", Name(), s_.path,
                                                      ec.message()));
    // File times are as coarse as the kernel's tick (4 ms here): files written in one tick come
    // in key order.
    std::sort(out.begin(), out.end(), [](const StoredObject& a, const StoredObject& b) {
      return std::tie(a.mtime_ns, a.key) < std::tie(b.mtime_ns, b.key);
    });
    return out;
  }

 private:
  const std::string& Name() const { return Options().name; }

  Status IoError(const char* what, const std::string& rel, int err) const {
    return Status(Code::kIoError,
                  fmt::format("{}: {} {}/{}: {}", Name(), what, s_.path, rel, ErrnoText(err)));
  }

  bool WantDirect(const void* p, uint64_t size) const {
    return s_.use_odirect && DirectOk() && Aligned(p, size);
  }
  bool DirectOk() const { return direct_ok_.load(std::memory_order_relaxed); }
  void DirectRefused(int err) {
    if (direct_ok_.exchange(false)) {
      KVT_LOG_WARN("{}: O_DIRECT refused under {} ({}); using buffered I/O", Name(), s_.path,
                   ErrnoText(err));
    }
  }

  // One attempt at a load. With `direct`, an EINVAL from the filesystem turns O_DIRECT off for
  // the connector and sets `refused` (the caller then retries buffered).
  Status GetFile(Conn& c, const std::string& key, const std::string& rel, MutableBuffer dst,
                 bool direct, bool& refused) {
    auto refuse = [&](int err) {
      DirectRefused(err);
      refused = true;
      return Status(Code::kNotFound, rel);
    };
    const int flags = O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0);
    Fd fd(::openat(root_.get(), rel.c_str(), flags));
    if (fd.get() < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return Status(Code::kNotFound, rel);
      if (direct && errno == EINVAL) return refuse(errno);
      return IoError("open", rel, errno);
    }
    struct stat sb;
    if (::fstat(fd.get(), &sb) != 0) return IoError("fstat", rel, errno);
    const uint64_t file_size = static_cast<uint64_t>(sb.st_size);
    uint8_t* page = c.page.get();

    if (file_size != kFsPayloadOffset + dst.size) {
      // Either a value of another size (a plain miss) or a torn file: the header tells.
      iovec iov{page, kFsPayloadOffset};
      const ssize_t n = TransferAll<false>(fd.get(), &iov, 1, 0);
      if (n < 0) {
        if (direct && errno == EINVAL) return refuse(errno);
        return IoError("read", rel, errno);
      }
      Result<FsHeader> h = DecodeFsHeader({page, static_cast<size_t>(n)});
      if (!h.ok()) return Discard(rel, fd.get(), h.status().message());
      if (file_size < kFsPayloadOffset || h->payload_length != file_size - kFsPayloadOffset) {
        return Discard(rel, fd.get(),
                       fmt::format("file is {} bytes, header says {} + {}", file_size,
                                   kFsPayloadOffset, h->payload_length));
      }
      if (h->key_hash != FsKeyHash(key)) return Discard(rel, fd.get(), "written for another key");
      return Status(Code::kNotFound, fmt::format("{}: stored value is {} bytes, not {}", rel,
                                                 h->payload_length, dst.size));
    }

    iovec iov[2] = {{page, kFsPayloadOffset}, {dst.data, dst.size}};
    const ssize_t n = TransferAll<false>(fd.get(), iov, 2, 0);
    if (n < 0) {
      if (direct && errno == EINVAL) return refuse(errno);
      return IoError("read", rel, errno);
    }
    if (static_cast<uint64_t>(n) != file_size) return Discard(rel, fd.get(), "short read");
    Result<FsHeader> h = DecodeFsHeader({page, kFsHeaderBytes});
    if (!h.ok()) return Discard(rel, fd.get(), h.status().message());
    if (h->payload_length != dst.size) {
      return Discard(rel, fd.get(),
                     fmt::format("file is {} bytes, header says {} + {}", file_size,
                                 kFsPayloadOffset, h->payload_length));
    }
    if (h->key_hash != FsKeyHash(key)) return Discard(rel, fd.get(), "written for another key");
    if (FsHash({dst.data, dst.size}) != h->payload_hash) {
      return Discard(rel, fd.get(), "payload checksum mismatch");
    }
    return Status::Ok();
  }

  // Removes a file that failed a check (unless the name now holds another file) and reports a
  // miss.
  Status Discard(const std::string& rel, int fd, const std::string& why) {
    struct stat open_sb, path_sb;
    const bool same = ::fstat(fd, &open_sb) == 0 &&
                      ::fstatat(root_.get(), rel.c_str(), &path_sb, 0) == 0 &&
                      open_sb.st_dev == path_sb.st_dev && open_sb.st_ino == path_sb.st_ino;
    if (same) ::unlinkat(root_.get(), rel.c_str(), 0);
    const uint64_t total = discarded_.fetch_add(1) + 1;
    uint64_t suppressed = 0;
    if (ShouldLog(Name() + ".fs.discard", 10.0, &suppressed)) {
      KVT_LOG_WARN("{}: removed damaged object file {}/{} ({}); {} so far, {} not logged", Name(),
                   s_.path, rel, why, total, suppressed);
    }
    return Status(Code::kNotFound, fmt::format("{}: {}", rel, why));
  }

  // One attempt at a store: temp file, then a no-replace rename onto `rel`. O_DIRECT refusals
  // are handled as in GetFile.
  Status SetFile(Conn& c, const std::string& key, const std::string& rel, ConstBuffer src,
                 bool direct, bool& refused) {
    const size_t slash = rel.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : rel.substr(0, slash);
    const std::string tmp =
        (dir.empty() ? "" : dir + "/") +
        fmt::format("{}{}-{:x}-{}", kFsTempPrefix, ::getpid(), nonce_, temp_counter_.fetch_add(1));
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0);
    int raw = ::openat(root_.get(), tmp.c_str(), flags, 0644);
    if (raw < 0 && errno == ENOENT && !dir.empty()) {
      KVT_RETURN_IF_ERROR(MakeShardDirs(dir));
      raw = ::openat(root_.get(), tmp.c_str(), flags, 0644);
    }
    if (raw < 0) {
      if (direct && errno == EINVAL) {
        DirectRefused(errno);
        refused = true;
        return Status::Ok();
      }
      return IoError("create", tmp, errno);
    }
    Fd fd(raw);
    // From here on every failure removes the temp file.
    auto fail = [&](const char* what, int err) {
      ::unlinkat(root_.get(), tmp.c_str(), 0);
      return IoError(what, tmp, err);
    };

    uint8_t* page = c.page.get();
    std::memset(page, 0, kFsPayloadOffset);
    const auto header = EncodeFsHeader({.payload_length = src.size,
                                        .payload_hash = FsHash({src.data, src.size}),
                                        .key_hash = FsKeyHash(key)});
    std::memcpy(page, header.data(), header.size());
    iovec iov[2] = {{page, kFsPayloadOffset}, {const_cast<uint8_t*>(src.data), src.size}};
    if (TransferAll<true>(fd.get(), iov, 2, 0) < 0) {
      const int err = errno;
      if (direct && err == EINVAL) {
        ::unlinkat(root_.get(), tmp.c_str(), 0);
        DirectRefused(err);
        refused = true;
        return Status::Ok();
      }
      return fail("write", err);
    }
    if (s_.fsync && ::fsync(fd.get()) != 0) return fail("fsync", errno);
    if (fd.Close() != 0) return fail("close", errno);

    if (::renameat2(root_.get(), tmp.c_str(), root_.get(), rel.c_str(), RENAME_NOREPLACE) == 0) {
      return Status::Ok();
    }
    int err = errno;
    if (err == EINVAL || err == ENOSYS) {
      // No RENAME_NOREPLACE on this filesystem: link() never replaces either.
      err = ::linkat(root_.get(), tmp.c_str(), root_.get(), rel.c_str(), 0) == 0 ? 0 : errno;
      ::unlinkat(root_.get(), tmp.c_str(), 0);
      if (err == 0) return Status::Ok();
    } else {
      ::unlinkat(root_.get(), tmp.c_str(), 0);
    }
    if (err == EEXIST) return Status(Code::kAlreadyExists, rel);  // a concurrent writer won
    return IoError("rename to", rel, err);
  }

  Status MakeShardDirs(const std::string& dir) {
    for (size_t end = 0; end != std::string::npos;) {
      end = dir.find('/', end + 1);
      const std::string prefix = dir.substr(0, end);
      if (::mkdirat(root_.get(), prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return IoError("mkdir", prefix, errno);
      }
    }
    return Status::Ok();
  }

  FsSettings s_;
  Fd root_;
  uint64_t nonce_ = 0;
  std::atomic<uint64_t> temp_counter_{0};
  std::atomic<bool> direct_ok_{true};
  std::atomic<uint64_t> discarded_{0};
};

Result<FsSettings> ParseFsSettings(const nlohmann::json& backend) {
  FsSettings s;
  bool have_path = false;
  for (const auto& [key, v] : backend.items()) {
    if (key == "path") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return Status(Code::kInvalidArgument, "fs: path must be a non-empty string");
      }
      s.path = v.get<std::string>();
      have_path = true;
    } else if (key == "shard_depth") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kFsMaxShardDepth) {
        return Status(
            Code::kInvalidArgument,
            fmt::format("fs: shard_depth must be an integer in [0, {}]", kFsMaxShardDepth));
      }
      s.shard_depth = static_cast<uint32_t>(v.get<int64_t>());
    } else if (key == "use_odirect" || key == "fsync") {
      if (!v.is_boolean())
        return Status(Code::kInvalidArgument, "fs: " + key + " must be a boolean");
      (key == "fsync" ? s.fsync : s.use_odirect) = v.get<bool>();
    } else {
      return Status(Code::kInvalidArgument, fmt::format("unknown key '{}' for type fs", key));
    }
  }
  if (!have_path) return Status(Code::kInvalidArgument, "fs: 'path' is required");
  return s;
}

// Creates the directory if needed, checks that files can be created in it, and returns it open.
Result<int> OpenRoot(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    return Status(Code::kIoError,
                  fmt::format("fs: cannot create path '{}': {}", path, ec.message()));
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Status(Code::kIoError,
                  fmt::format("fs: cannot open path '{}': {}", path, ErrnoText(errno)));
  }
  const std::string probe = fmt::format("{}probe-{}", kFsTempPrefix, ::getpid());
  const int p = ::openat(fd, probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (p < 0) {
    const int err = errno;
    ::close(fd);
    return Status(Code::kIoError,
                  fmt::format("fs: path '{}' is not writable: {}", path, ErrnoText(err)));
  }
  ::close(p);
  ::unlinkat(fd, probe.c_str(), 0);
  return fd;
}

// Removes temp files left by a crash and counts the objects already there (for the log).
void SweepStartup(const std::string& name, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  uint64_t objects = 0, removed = 0;
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (it.depth() >= static_cast<int>(kFsMaxShardDepth)) it.disable_recursion_pending();
    if (!it->is_regular_file(fec)) continue;
    if (!IsFsTempName(it->path().filename().string())) {
      ++objects;
      continue;
    }
    const auto mtime = it->last_write_time(fec);
    if (!fec && now - mtime > kStaleTempAge && fs::remove(it->path(), fec)) ++removed;
  }
  if (ec) KVT_LOG_WARN("{}: scanning {}: {}", name, path, ec.message());
  KVT_LOG_INFO("{}: {} holds {} object files; removed {} stale temp files", name, path, objects,
               removed);
}

}  // namespace

ConnectorResult CreateFsConnector(const ConnectorOptions& options, const nlohmann::json& backend) {
  Result<FsSettings> s = ParseFsSettings(backend);
  if (!s.ok()) return s.status();
  Result<int> root = OpenRoot(s->path);
  if (!root.ok()) return root.status();
  SweepStartup(options.name, s->path);
  return std::unique_ptr<Connector>(
      std::make_unique<FsConnector>(options, std::move(s).value(), *root));
}

}  // namespace kvtier
