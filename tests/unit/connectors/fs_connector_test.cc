// The fs connector on real files in a fresh directory under /tmp per test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "connector_test_util.h"
#include "connectors/fs_object_file.h"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using namespace kvtier::testing;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvt-fs-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string FsConfig(const std::string& path, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = {{"type", "fs"}, {"path", path}, {"num_threads", 2}};
  j.update(extra);
  return j.dump();
}

Status CreateStatus(const std::string& json) {
  auto cfg = ParseAdapterConfig(json, 0);
  if (!cfg.ok()) return cfg.status();
  return ConnectorRegistry::WithBuiltins().Create(*cfg).status();
}

std::string FileOf(const std::string& dir, const std::string& key, uint32_t depth = 1) {
  auto rel = FsObjectPath(key, depth);
  EXPECT_TRUE(rel.ok()) << rel.status().ToString();
  return dir + "/" + (rel.ok() ? *rel : std::string("?"));
}

// Every regular file under `dir`, as paths relative to it.
std::set<std::string> FilesUnder(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  }
  return out;
}

size_t TempFilesUnder(const std::string& dir) {
  size_t n = 0;
  for (const auto& f : FilesUnder(dir)) n += IsFsTempName(fs::path(f).filename().string());
  return n;
}

void FlipByte(const std::string& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Stores one value and returns the path of its file.
std::string StoreOne(Connector& c, const std::string& dir, const std::string& key,
                     const std::vector<uint8_t>& value) {
  auto st = StoreAll(c, {key}, {value});
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 1u);
  return FileOf(dir, key);
}

bool LoadsAs(Connector& c, const std::string& key, const std::vector<uint8_t>& want) {
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(want.size()));
  auto ld = LoadAll(c, {key}, out);
  EXPECT_TRUE(ld.status.ok()) << ld.status.ToString();
  return ld.Hits() == 1 && out[0] == want;
}

TEST(FsConnectorTest, RoundTripManyKeysAndAOneMiBValue) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path(), {{"num_threads", 3}}));
  ASSERT_TRUE(c);
  auto keys = Keys(40);
  auto values = Values(40, 3000);
  keys.push_back("Qwen/Qwen2-7B@00010001@0@" + std::string(32, 'a'));
  values.push_back(Values(1, 1 << 20, 9)[0]);
  auto st = StoreAll(*c, keys, values);
  ASSERT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), keys.size());
  EXPECT_EQ(st.bytes, 40u * 3000 + (1u << 20));

  auto probe = keys;
  probe.push_back("m@00000000@0@missing");
  auto lk = LookupAll(*c, probe);
  EXPECT_EQ(lk.Hits(), keys.size());
  EXPECT_EQ(lk.results.back(), 0);
  c->Unlock(probe);

  std::vector<std::vector<uint8_t>> out;
  for (const auto& v : values) out.emplace_back(v.size(), 0);
  out.emplace_back(16, 0);
  auto ld = LoadAll(*c, probe, out);
  ASSERT_TRUE(ld.status.ok()) << ld.status.ToString();
  EXPECT_EQ(ld.Hits(), keys.size());
  EXPECT_EQ(ld.bytes, st.bytes);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(out[i], values[i]) << keys[i];

  // Every object is one file of header block + payload; no temp files are left.
  EXPECT_EQ(fs::file_size(FileOf(d.path(), keys.back())), kFsPayloadOffset + (1u << 20));
  EXPECT_EQ(FilesUnder(d.path()).size(), keys.size());

  auto rm = RemoveAll(*c, {keys[0], keys[1], "m@00000000@0@missing"});
  EXPECT_EQ(rm.results, (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_FALSE(fs::exists(FileOf(d.path(), keys[0])));
  EXPECT_EQ(LookupAll(*c, {keys[0], keys[2]}).results, (std::vector<uint8_t>{0, 1}));
}

TEST(FsConnectorTest, FirstWriterWins) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto keys = Keys(1);
  ASSERT_EQ(StoreAll(*c, keys, Values(1, 64, 1)).bytes, 64u);
  auto again = StoreAll(*c, keys, Values(1, 64, 2));
  EXPECT_TRUE(again.status.ok());
  EXPECT_EQ(again.Hits(), 1u);
  EXPECT_EQ(again.bytes, 0u);
  EXPECT_TRUE(LoadsAs(*c, keys[0], Values(1, 64, 1)[0]));
}

TEST(FsConnectorTest, ARestartedConnectorFindsWhatIsOnDisk) {
  TempDir d;
  auto keys = Keys(20);
  auto values = Values(20, 5000, 3);
  {
    auto first = MakeConnector(FsConfig(d.path(), {{"shard_depth", 2}}));
    ASSERT_TRUE(StoreAll(*first, keys, values).status.ok());
  }
  auto second = MakeConnector(FsConfig(d.path(), {{"shard_depth", 2}}));
  ASSERT_TRUE(second);
  EXPECT_EQ(LookupAll(*second, keys).Hits(), keys.size());
  std::vector<std::vector<uint8_t>> out(20, std::vector<uint8_t>(5000));
  EXPECT_EQ(LoadAll(*second, keys, out).Hits(), keys.size());
  EXPECT_EQ(out, values);
  // And first writer wins across the restart.
  EXPECT_EQ(StoreAll(*second, keys, Values(20, 5000, 4)).bytes, 0u);
}

TEST(FsConnectorTest, AFlippedPayloadByteIsAMissAndTheFileIsRemoved) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto value = Values(1, 8192)[0];
  const std::string file = StoreOne(*c, d.path(), "k1", value);
  FlipByte(file, kFsPayloadOffset + 5000);
  EXPECT_FALSE(LoadsAs(*c, "k1", value));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(LookupAll(*c, {"k1"}).Hits(), 0u);
  // The key can be stored again.
  StoreOne(*c, d.path(), "k1", value);
  EXPECT_TRUE(LoadsAs(*c, "k1", value));
}

TEST(FsConnectorTest, ATruncatedFileIsAMissAndIsRemoved) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto value = Values(1, 10000)[0];
  for (uint64_t size :
       {uint64_t{kFsPayloadOffset + 4000}, uint64_t{kFsPayloadOffset}, uint64_t{20}, uint64_t{0}}) {
    const std::string file = StoreOne(*c, d.path(), "k", value);
    fs::resize_file(file, size);
    EXPECT_FALSE(LoadsAs(*c, "k", value)) << size;
    EXPECT_FALSE(fs::exists(file)) << size;
  }
}

TEST(FsConnectorTest, AFileCopiedToAnotherKeysNameIsAMiss) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto value = Values(1, 4096)[0];
  const std::string a = StoreOne(*c, d.path(), "key-a", value);
  const std::string b = FileOf(d.path(), "key-b");
  fs::create_directories(fs::path(b).parent_path());
  fs::copy_file(a, b);
  EXPECT_FALSE(LoadsAs(*c, "key-b", value));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_TRUE(LoadsAs(*c, "key-a", value));
}

TEST(FsConnectorTest, HeaderGarbageIsAMiss) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto value = Values(1, 1000)[0];
  for (uint64_t offset : {0, 5, 17, 40, 60}) {  // magic, version, length, reserved, checksum
    const std::string file = StoreOne(*c, d.path(), "k", value);
    FlipByte(file, offset);
    EXPECT_FALSE(LoadsAs(*c, "k", value)) << offset;
    EXPECT_FALSE(fs::exists(file)) << offset;
  }
}

TEST(FsConnectorTest, AValueOfAnotherSizeIsAPlainMissAndStays) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto value = Values(1, 1000)[0];
  const std::string file = StoreOne(*c, d.path(), "k", value);
  EXPECT_FALSE(LoadsAs(*c, "k", std::vector<uint8_t>(999)));
  EXPECT_FALSE(LoadsAs(*c, "k", std::vector<uint8_t>(1001)));
  EXPECT_TRUE(fs::exists(file));
  EXPECT_TRUE(LoadsAs(*c, "k", value));
}

TEST(FsConnectorTest, KeysCannotNameAPathOutsideTheDirectory) {
  TempDir d;
  const std::string root = d.path() + "/store";
  auto c = MakeConnector(FsConfig(root));
  const std::vector<std::string> keys = {"../../etc/passwd",
                                         "a/b",
                                         "/etc/passwd",
                                         "..",
                                         ".",
                                         std::string("x\0y", 3),
                                         "x",
                                         "%2F",
                                         "/",
                                         ".tmp-1-2-3",
                                         "model/with/slashes@00010001@0@abc",
                                         "\xff\xfe\n"};
  std::vector<std::vector<uint8_t>> values;
  for (size_t i = 0; i < keys.size(); ++i) values.push_back(Values(1, 100 + i, 5)[0]);
  auto st = StoreAll(*c, keys, values);
  ASSERT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), keys.size());
  // Nothing outside the store directory, one file per key inside it, each in a shard directory.
  EXPECT_EQ(FilesUnder(d.path()).size(), keys.size());
  for (const auto& f : FilesUnder(root)) {
    EXPECT_EQ(fs::path(f).parent_path().string().size(), 2u) << f;
    EXPECT_FALSE(fs::path(f).filename().string().starts_with(".")) << f;
  }
  // Distinct keys stay distinct ("x\0y" is not "x").
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(LoadsAs(*c, keys[i], values[i])) << i;
}

TEST(FsConnectorTest, EmptyAndOverlongKeysAreRejectedAlone) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  const std::string longkey(300, 'k');
  const std::string escapes_too_long(100, '/');  // 300 bytes once escaped
  std::vector<std::string> keys = {"good-1", longkey, "", escapes_too_long, "good-2"};
  auto st = StoreAll(*c, keys, Values(5, 64));
  EXPECT_EQ(st.status.code(), Code::kInvalidArgument);
  EXPECT_NE(st.status.message().find("too long"), std::string::npos) << st.status.ToString();
  EXPECT_EQ(st.results, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_EQ(st.bytes, 128u);
  auto lk = LookupAll(*c, keys);
  EXPECT_TRUE(lk.status.ok());
  EXPECT_EQ(lk.results, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  c->Unlock(keys);
  std::vector<std::vector<uint8_t>> out(5, std::vector<uint8_t>(64));
  auto ld = LoadAll(*c, keys, out);
  EXPECT_TRUE(ld.status.ok());
  EXPECT_EQ(ld.results, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  auto rm = RemoveAll(*c, keys);
  EXPECT_TRUE(rm.status.ok());
  EXPECT_EQ(rm.results, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
}

TEST(FsConnectorTest, FactoryErrorsNameTheProblem) {
  TempDir d;
  const std::string file = d.path() + "/plain-file";
  std::ofstream(file) << "x";
  struct Case {
    std::string json;
    Code code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {FsConfig(file + "/sub"), Code::kIoError, "cannot create path '" + file + "/sub'"},
      {FsConfig(file), Code::kIoError, "cannot create path"},
      {R"({"type":"fs"})", Code::kInvalidArgument, "'path' is required"},
      {R"({"type":"fs","path":""})", Code::kInvalidArgument, "path must be a non-empty string"},
      {FsConfig(d.path(), {{"x", 1}}), Code::kInvalidArgument, "unknown key 'x' for type fs"},
      {FsConfig(d.path(), {{"shard_depth", 4}}), Code::kInvalidArgument, "shard_depth must be"},
      {FsConfig(d.path(), {{"use_odirect", "yes"}}), Code::kInvalidArgument,
       "use_odirect must be a boolean"},
      {FsConfig(d.path(), {{"fsync", 1}}), Code::kInvalidArgument, "fsync must be a boolean"},
  };
  for (const auto& c : cases) {
    Status s = CreateStatus(c.json);
    EXPECT_EQ(s.code(), c.code) << c.json << " -> " << s.ToString();
    EXPECT_NE(s.message().find(c.text), std::string::npos) << c.json << " -> " << s.ToString();
  }
  // A missing directory is created, with its parents.
  EXPECT_TRUE(CreateStatus(FsConfig(d.path() + "/a/b/c")).ok());
  EXPECT_TRUE(fs::is_directory(d.path() + "/a/b/c"));
}

TEST(FsConnectorTest, StaleTempFilesAreRemovedAtStartup) {
  TempDir d;
  auto value = Values(1, 100)[0];
  {
    auto c = MakeConnector(FsConfig(d.path()));
    StoreOne(*c, d.path(), "kept", value);
  }
  fs::create_directories(d.path() + "/ab");
  const std::string stale = d.path() + "/ab/.tmp-1-2-3";
  const std::string stale_root = d.path() + "/.tmp-4-5-6";
  const std::string fresh = d.path() + "/ab/.tmp-7-8-9";
  for (const auto& f : {stale, stale_root, fresh}) std::ofstream(f) << "partial";
  const auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  fs::last_write_time(stale, day_ago);
  fs::last_write_time(stale_root, day_ago);

  auto c = MakeConnector(FsConfig(d.path()));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_root));
  EXPECT_TRUE(fs::exists(fresh));  // may belong to a live writer sharing the directory
  EXPECT_TRUE(LoadsAs(*c, "kept", value));
}

// Restores RLIMIT_FSIZE and SIGXFSZ's disposition when the test ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG
    rlimit lim = saved_;
    lim.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

TEST(FsConnectorTest, AFailedWriteLeavesNoFileBehind) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path()));
  auto big = Values(1, 256 << 10)[0];
  {
    FileSizeLimit limit(64 << 10);  // the whole process, for this block only
    auto st = StoreAll(*c, {"big"}, {big});
    EXPECT_EQ(st.status.code(), Code::kIoError) << st.status.ToString();
    EXPECT_NE(st.status.message().find("File too large"), std::string::npos)
        << st.status.ToString();
    EXPECT_EQ(st.Hits(), 0u);
  }
  EXPECT_TRUE(FilesUnder(d.path()).empty());
  EXPECT_EQ(LookupAll(*c, {"big"}).Hits(), 0u);
  StoreOne(*c, d.path(), "big", big);
  EXPECT_TRUE(LoadsAs(*c, "big", big));
}

TEST(FsConnectorTest, ConcurrentStoresOfOneKeyLeaveOneValidFile) {
  TempDir d;
  // Two connectors on one directory stand in for two processes sharing it.
  auto c1 = MakeConnector(FsConfig(d.path(), {{"num_threads", 4}}));
  auto c2 = MakeConnector(FsConfig(d.path(), {{"num_threads", 4}}));
  constexpr size_t kTasks = 6, kCopies = 4, kSize = 200000;
  for (int round = 0; round < 5; ++round) {
    const std::string key = "same-key-" + std::to_string(round);
    std::vector<std::vector<uint8_t>> values;
    for (size_t t = 0; t < kTasks; ++t) values.push_back(Values(1, kSize, t + 1)[0]);
    // All tasks are in flight at once on 8 worker threads; each names the key several times, so
    // tiles of one task race too.
    CompletionRouter router({c1.get(), c2.get()});
    std::vector<std::future<Completion>> futures;
    for (size_t t = 0; t < kTasks; ++t) {
      futures.push_back(router.Submit(t % 2, ConnectorOp::kWrite, [&](Connector& x) {
        return x.SubmitWrite(std::vector<std::string>(kCopies, key),
                             std::vector<ConstBuffer>(kCopies, {values[t].data(), kSize}));
      }));
    }
    std::vector<Completion> done;
    for (auto& f : futures) done.push_back(f.get());
    router.Stop();
    uint64_t bytes = 0;
    for (const auto& comp : done) {
      EXPECT_TRUE(comp.status.ok()) << comp.status.ToString();
      EXPECT_EQ(comp.Hits(), kCopies);
      bytes += comp.bytes;
    }
    EXPECT_EQ(bytes, kSize);  // exactly one store wrote
    EXPECT_EQ(TempFilesUnder(d.path()), 0u);
    std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(kSize));
    ASSERT_EQ(LoadAll(*c1, {key}, out).Hits(), 1u);
    size_t matches = 0;
    for (const auto& v : values) matches += out[0] == v;
    EXPECT_EQ(matches, 1u);
  }
  EXPECT_EQ(FilesUnder(d.path()).size(), 5u);
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n)
      : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
  ~AlignedBuffer() { std::free(data); }
  size_t size;
  uint8_t* data;
};

TEST(FsConnectorTest, ODirectRoundTripsAlignedAndUnalignedValues) {
  TempDir d;
  auto c = MakeConnector(FsConfig(d.path(), {{"use_odirect", true}}));
  ASSERT_TRUE(c);
  // Aligned: O_DIRECT where the filesystem allows it (else buffered, logged once). Unaligned
  // length: always buffered. Either way the bytes must come back.
  for (size_t size : {size_t{64 << 10}, size_t{4096}, size_t{10000}}) {
    const std::string key = "odirect-" + std::to_string(size);
    AlignedBuffer src(size), dst(size);
    for (size_t i = 0; i < size; ++i) src.data[i] = static_cast<uint8_t>(i * 13 + size);
    std::memset(dst.data, 0, size);
    auto st = Await(*c, ConnectorOp::kWrite, [&](Connector& x) {
      return x.SubmitWrite({key}, {ConstBuffer{src.data, size}});
    });
    ASSERT_TRUE(st.status.ok()) << st.status.ToString();
    EXPECT_EQ(st.bytes, size);
    auto ld = Await(*c, ConnectorOp::kLoad, [&](Connector& x) {
      return x.SubmitLoad({key}, {MutableBuffer{dst.data, size}});
    });
    ASSERT_TRUE(ld.status.ok()) << ld.status.ToString();
    EXPECT_EQ(ld.Hits(), 1u) << size;
    EXPECT_EQ(std::memcmp(src.data, dst.data, size), 0) << size;
    EXPECT_EQ(fs::file_size(FileOf(d.path(), key)), kFsPayloadOffset + size);
  }
  // A file written with O_DIRECT reads back through a buffered connector too.
  c.reset();
  auto buffered = MakeConnector(FsConfig(d.path()));
  std::vector<uint8_t> want(4096);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 13 + 4096);
  EXPECT_TRUE(LoadsAs(*buffered, "odirect-4096", want));
}

TEST(FsConnectorTest, ShardDepthPlacesFiles) {
  for (uint32_t depth : {0u, 1u, 3u}) {
    TempDir d;
    auto c = MakeConnector(FsConfig(d.path(), {{"shard_depth", depth}}));
    auto value = Values(1, 50)[0];
    ASSERT_TRUE(StoreAll(*c, {"k@1"}, {value}).status.ok());
    const auto files = FilesUnder(d.path());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(*files.begin(), FsShardDir(FsKeyHash("k@1"), depth) + (depth ? "/" : "") + "k@1");
    EXPECT_TRUE(LoadsAs(*c, "k@1", value));
  }
}

// The on-disk format itself.

TEST(FsObjectFileTest, HeaderRoundTripsAndEveryByteIsChecked) {
  const FsHeader h{.payload_length = 123456789,
                   .payload_hash = 0x1122334455667788ULL,
                   .key_hash = 0x99aabbccddeeff00ULL};
  auto bytes = EncodeFsHeader(h);
  auto back = DecodeFsHeader(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x01;
    auto r = DecodeFsHeader(bad);
    EXPECT_FALSE(r.ok()) << "byte " << i;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}}) {
    EXPECT_FALSE(DecodeFsHeader(std::span<const uint8_t>(bytes.data(), n)).ok()) << n;
  }
  std::vector<uint8_t> zeros(4096, 0);
  EXPECT_FALSE(DecodeFsHeader(zeros).ok());
}

TEST(FsObjectFileTest, NamesEscapeEverythingThatCouldLeaveTheDirectory) {
  EXPECT_EQ(*FsObjectName("m@0001@0@ab"), "m@0001@0@ab");
  EXPECT_EQ(*FsObjectName("a/b"), "a%2Fb");
  EXPECT_EQ(*FsObjectName("../x"), "%2E.%2Fx");
  EXPECT_EQ(*FsObjectName(".."), "%2E.");
  EXPECT_EQ(*FsObjectName("."), "%2E");
  EXPECT_EQ(*FsObjectName("a%2Fb"), "a%252Fb");  // '%' itself is escaped: one-to-one
  EXPECT_EQ(*FsObjectName(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(*FsObjectName("a b"), "a%20b");
  EXPECT_FALSE(FsObjectName("").ok());
  EXPECT_TRUE(FsObjectName(std::string(kFsMaxNameBytes, 'x')).ok());
  EXPECT_FALSE(FsObjectName(std::string(kFsMaxNameBytes + 1, 'x')).ok());
  EXPECT_EQ(FsShardDir(0xab12cd0000000000ULL, 2), "ab/12");
  EXPECT_EQ(FsShardDir(0xab12cd0000000000ULL, 0), "");
}

}  // namespace
}  // namespace kvtier
