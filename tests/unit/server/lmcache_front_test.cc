// The LMCache front in-process: a ServerContext composed as CacheServer composes it (L1 pool,
// sessions, worker registry, prefetch controller, kvtier's handler table), the front on a
// loopback port, and a DEALER sending what lmcache 0.5.6's client sends, the worker's KV cache in
// POSIX shm objects named like LMCache's. Every byte a RETRIEVE writes is checked.
#include "server/lmcache_front.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "server/prefetch_controller.h"
#include "support/eventually.h"

namespace kvtier {
namespace {

constexpr uint32_t kChunk = 32;
constexpr uint32_t kBlockTokens = 16;
constexpr int64_t kBlocks = 24, kHeads = 2, kDim = 8;
constexpr uint64_t kBlockBytes = kBlockTokens * kHeads * kDim * 2;  // bf16
constexpr uint64_t kLayerBytes = 2 * kBlocks * kBlockBytes;
constexpr int kLayers = 2;
constexpr uint64_t kInstance = 4242;
const std::string kModel = "kvtier-front-test";

template <typename Fill>
std::string Pack(Fill fill) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  fill(pk);
  return {b.data(), b.size()};
}
template <typename T>
std::string P(const T& v) {
  return Pack([&](auto& pk) { pk.pack(v); });
}
std::string Nil() {
  return Pack([](auto& pk) { pk.pack_nil(); });
}
std::string Bin(const std::string& s) {
  return Pack([&](auto& pk) {
    pk.pack_bin(s.size());
    pk.pack_bin_body(s.data(), s.size());
  });
}

// One layer's [2, blocks, tokens, heads, dim] bf16 tensor in a shm object, as LMCache's CPU
// transfer context moves it there; unlinked at the end.
struct ShmTensor {
  std::string name;
  uint8_t* data = nullptr;
  explicit ShmTensor(int layer)
      : name("/lmcache_kv_kvtiertest_" + std::to_string(::getpid()) + "_" + std::to_string(layer)) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << name;
    EXPECT_EQ(::ftruncate(fd, kLayerBytes), 0);
    data = static_cast<uint8_t*>(
        ::mmap(nullptr, kLayerBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
  }
  ~ShmTensor() {
    ::munmap(data, kLayerBytes);
    ::shm_unlink(name.c_str());
  }
  uint8_t* Block(int kv, uint32_t block) const {
    return data + kv * kBlocks * kBlockBytes + block * kBlockBytes;
  }
  // The ext-1 descriptor lmcache 0.5.6 sends for it (CpuShmTensorWrapper).
  // `shape` and `stride` replace the [2, blocks, tokens, heads, dim] view of the same bytes.
  std::string Descriptor(const std::string& type = "cpu_shm", std::vector<int64_t> shape = {},
                         std::vector<int64_t> stride = {}) const {
    if (shape.empty()) {
      shape = {2, kBlocks, kBlockTokens, kHeads, kDim};
      stride = {kBlocks * kBlockTokens * kHeads * kDim, kBlockTokens * kHeads * kDim, kHeads * kDim,
                kDim, 1};
    }
    const std::string map = Pack([&](auto& pk) {
      pk.pack_map(5);
      pk.pack("type"), pk.pack(type);
      pk.pack("shm_name"), pk.pack(name);
      pk.pack("nbytes"), pk.pack(kLayerBytes);
      pk.pack("version"), pk.pack(1);
      pk.pack("metadata");
      pk.pack_map(5);
      pk.pack("dtype"), pk.pack("bfloat16");
      pk.pack("shape"), pk.pack(shape);
      pk.pack("stride"), pk.pack(stride);
      pk.pack("storage_offset"), pk.pack(0);
      pk.pack("device_uuid"), pk.pack("cpu");
    });
    return map;
  }
};

std::string Key(const std::vector<uint32_t>& tokens, uint64_t start, uint64_t end,
                const std::string& request_id, std::optional<uint32_t> worker,
                uint32_t world_size = 1) {
  return Pack([&](auto& pk) {
    pk.pack_map(10);
    pk.pack("model_name"), pk.pack(kModel);
    pk.pack("world_size"), pk.pack(world_size);
    pk.pack("worker_id");
    worker ? pk.pack(*worker) : pk.pack_nil();
    pk.pack("token_ids"), pk.pack(tokens);
    pk.pack("start"), pk.pack(start);
    pk.pack("end"), pk.pack(end);
    pk.pack("request_id"), pk.pack(request_id);
    pk.pack("cache_salt"), pk.pack("");
    pk.pack("request_configs"), pk.pack_nil();
    pk.pack("num_kv_readers"), pk.pack(1);
  });
}

using Frames = std::vector<std::string>;

class LmcacheFrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig cfg;
    cfg.chunk_size = kChunk;
    ctx_ = std::make_unique<ServerContext>(cfg, HashAlgo::kXxh3, clock_);
    L1Options o;
    o.capacity_bytes = 64 << 20;
    o.prefault = false;
    o.huge_pages = false;
    o.metrics = &ctx_->metrics;
    o.clock = &clock_;
    ctx_->l1 = std::move(L1Pool::Create(o)).value();
    RegisterRegistrationHandlers(*ctx_, table_);
    RegisterTransferHandlers(*ctx_, table_);
    prefetch_ = std::make_shared<PrefetchController>(*ctx_);
    RegisterLookupHandlers(*ctx_, table_, prefetch_);
    RegisterAdminHandlers(*ctx_, table_);
    front_ = std::make_unique<LmcacheFront>(*ctx_, table_, zctx_);
    ASSERT_TRUE(front_->Bind("tcp://127.0.0.1:*").ok());
    thread_ = std::thread([this] { front_->Run(stop_); });
    client_ = zmq::socket_t(zctx_, zmq::socket_type::dealer);
    client_.set(zmq::sockopt::linger, 0);
    client_.connect(front_->Endpoint());
  }

  void TearDown() override {
    stop_.Notify();
    thread_.join();
    client_.close();
    front_.reset();
    prefetch_->Shutdown();
  }

  void Send(const Frames& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      client_.send(zmq::buffer(frames[i]),
                   i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  Frames Receive() {
    zmq::pollitem_t item{client_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::seconds(10)) != 1) {
      ADD_FAILURE() << "no reply within 10 s";
      return {};
    }
    Frames out;
    do {
      zmq::message_t m;
      (void)client_.recv(m);
      out.push_back(m.to_string());
    } while (client_.get(zmq::sockopt::rcvmore));
    return out;
  }

  // Sends [uid, op, args...] and returns the reply's result part (nullopt: a void reply).
  std::optional<msgpack::object_handle> Call(int op, const Frames& args) {
    Frames f{P(uid_), P(op)};
    f.insert(f.end(), args.begin(), args.end());
    Send(f);
    Frames r = Receive();
    EXPECT_GE(r.size(), 2u);
    if (r.size() < 2) return std::nullopt;
    EXPECT_EQ(r[0], f[0]);  // echoed byte for byte
    EXPECT_EQ(r[1], f[1]);
    ++uid_;
    if (r.size() == 2) return std::nullopt;
    EXPECT_EQ(r.size(), 3u);
    return msgpack::unpack(r[2].data(), r[2].size());
  }

  // STORE and RETRIEVE answer [event handle, ok].
  bool CallTransfer(int op, const Frames& args) {
    auto r = Call(op, args);
    if (!r) {
      ADD_FAILURE() << "void transfer reply";
      return false;
    }
    const auto arr = r->get().as<std::vector<msgpack::object>>();
    EXPECT_EQ(arr.size(), 2u);
    EXPECT_EQ(arr[0].type, msgpack::type::BIN);
    return arr[1].as<bool>();
  }

  Frames RegisterArgs(const std::vector<std::string>& descriptors, uint64_t instance = kInstance,
                      uint32_t world_size = 1) {
    const std::string kv = Pack([&](auto& pk) {
      pk.pack_array(descriptors.size());
      for (const auto& d : descriptors) {
        pk.pack_ext(d.size(), 1);
        pk.pack_ext_body(d.data(), d.size());
      }
    });
    const std::string groups = Pack([](auto& pk) {
      pk.pack_array(1);
      pk.pack_map(6);
      pk.pack("engine_group_id"), pk.pack(0);
      pk.pack("layer_indices"), pk.pack(std::vector<int>{0, 1});
      pk.pack("tokens_per_block"), pk.pack(kBlockTokens);
      pk.pack("sw_size_tokens"), pk.pack(-1);
      pk.pack("extra_object_group_tag"), pk.pack(0);
      pk.pack("recurrent_state"), pk.pack(false);
    });
    const std::string hints = Pack([](auto& pk) {
      pk.pack_map(1);
      pk.pack("kv_layout"), pk.pack("NHD");
    });
    return {P(instance), kv, P(kModel), P(world_size), P("vllm"), hints, groups};
  }

  double Counter(const std::string& name, const Labels& labels) {
    return ctx_->metrics.GetCounter(name, "", labels)->Value();
  }

  FakeClock clock_;  // the front reaps silent workers on it
  std::unique_ptr<ServerContext> ctx_;
  HandlerTable table_;
  std::shared_ptr<PrefetchController> prefetch_;
  zmq::context_t zctx_{1};
  std::unique_ptr<LmcacheFront> front_;
  EventNotifier stop_;
  std::thread thread_;
  zmq::socket_t client_;
  uint64_t uid_ = 0;
};

std::vector<uint32_t> Tokens(size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = 1000 + static_cast<uint32_t>(i * 7);
  return t;
}

std::string Blocks(const std::vector<uint32_t>& ids) {
  return Pack([&](auto& pk) {
    pk.pack_array(1);
    pk.pack(ids);
  });
}

TEST_F(LmcacheFrontTest, StoreLookupRetrieveThroughSharedMemory) {
  EXPECT_EQ(Call(21, {})->get().as<int64_t>(), kChunk);  // get_chunk_size
  EXPECT_TRUE(Call(22, {Nil()})->get().as<bool>());      // ping from the scheduler
  EXPECT_TRUE(Call(32, {})->get().as<std::vector<std::string>>().empty());  // get_experimental
  std::vector<std::unique_ptr<ShmTensor>> layers;
  std::vector<std::string> descs;
  for (int l = 0; l < kLayers; ++l) {
    layers.push_back(std::make_unique<ShmTensor>(l));
    for (uint64_t i = 0; i < kLayerBytes; ++i) {
      layers[l]->data[i] = static_cast<uint8_t>(i * 31 + l * 7 + 3);
    }
    descs.push_back(layers[l]->Descriptor());
  }
  EXPECT_FALSE(Call(1, RegisterArgs(descs)));  // register_kv_cache: void
  ASSERT_EQ(ctx_->workers.Count(), 1u);

  const auto tokens = Tokens(3 * kChunk + 5);
  const std::vector<uint32_t> src{1, 2, 3, 4, 5, 6};
  const std::string handle = Bin("stub_ipc_handle");
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 3 * kChunk, "store-req", 0), P(kInstance), Blocks(src), handle}));

  EXPECT_FALSE(Call(8, {Key(tokens, 0, 3 * kChunk, "rid", std::nullopt), P(1)}));  // lookup
  std::optional<msgpack::object_handle> hits;
  for (int i = 0; i < 1000 && !hits; ++i) hits = Call(9, {P("rid")});  // None while running
  ASSERT_TRUE(hits);
  EXPECT_EQ(hits->get().as<int64_t>(), 3);
  EXPECT_EQ(Call(9, {P("rid")})->get().as<int64_t>(), 0);  // answered once, then 0
  EXPECT_EQ(Call(9, {P("never-seen")})->get().as<int64_t>(), 0);

  const std::vector<uint32_t> dst{18, 19, 20, 21, 22, 23};
  std::vector<std::vector<uint8_t>> before;
  for (auto& l : layers) {
    before.emplace_back(l->data, l->data + kLayerBytes);
    for (int kv = 0; kv < 2; ++kv) {
      for (uint32_t b : dst) std::memset(l->Block(kv, b), 0, kBlockBytes);
    }
  }
  EXPECT_TRUE(CallTransfer(
      7, {Key(tokens, 0, 3 * kChunk, "rid", 0), P(kInstance), Blocks(dst), handle, P(0)}));
  for (int l = 0; l < kLayers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (size_t i = 0; i < dst.size(); ++i) {
        EXPECT_EQ(std::memcmp(layers[l]->Block(kv, dst[i]),
                              before[l].data() + (layers[l]->Block(kv, src[i]) - layers[l]->data),
                              kBlockBytes),
                  0)
            << "layer " << l << " kv " << kv << " block " << dst[i];
      }
      // Blocks outside the destination are untouched.
      EXPECT_EQ(std::memcmp(layers[l]->Block(kv, 0), before[l].data() + kv * kBlocks * kBlockBytes,
                            18 * kBlockBytes),
                0);
    }
  }
  EXPECT_FALSE(Call(13, {P("rid")}));  // end_session
  // A retrieve of a range nothing stored answers ok=false; the worker recomputes.
  const std::vector<uint32_t> unseen(kChunk, 5);
  EXPECT_FALSE(CallTransfer(
      7, {Key(unseen, 0, kChunk, "other", 0), P(kInstance), Blocks({7, 8}), handle, P(0)}));
  EXPECT_FALSE(Call(2, {P(kInstance)}));  // unregister_kv_cache
  EXPECT_EQ(ctx_->workers.Count(), 0u);
}

TEST_F(LmcacheFrontTest, RetrieveLeavesTheFirstTokensAlone) {
  ShmTensor layer(0);
  for (uint64_t i = 0; i < kLayerBytes; ++i) layer.data[i] = static_cast<uint8_t>(i * 13 + 1);
  Frames reg = RegisterArgs({layer.Descriptor()});
  EXPECT_FALSE(Call(1, reg));
  const auto tokens = Tokens(2 * kChunk);
  const std::string handle = Bin("stub_ipc_handle");
  // The second chunk only, [32, 64): its block list covers that range alone.
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "s", 0), P(kInstance), Blocks({1, 2, 3, 4}), handle}));
  const std::vector<uint8_t> before(layer.data, layer.data + kLayerBytes);
  for (int kv = 0; kv < 2; ++kv) std::memset(layer.Block(kv, 10), 0, 2 * kBlockBytes);
  // Retrieve chunk 1 into blocks 10, 11, skipping its first 16 tokens (block 10).
  EXPECT_TRUE(CallTransfer(7, {Key(tokens, kChunk, 2 * kChunk, "r", 0), P(kInstance),
                               Blocks({10, 11}), handle, P(kBlockTokens)}));
  for (int kv = 0; kv < 2; ++kv) {
    const uint8_t* zero = layer.Block(kv, 10);
    EXPECT_TRUE(std::all_of(zero, zero + kBlockBytes, [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(std::memcmp(layer.Block(kv, 11), before.data() + (layer.Block(kv, 4) - layer.data),
                          kBlockBytes),
              0);
  }
}

TEST_F(LmcacheFrontTest, RefusedMessagesGetNoReplyAndTheNextRequestIsAnswered) {
  Send({P(90), P("no_such_operation")});
  Send({P(91), P(21), P(0)});    // one part too many
  Send({P(92), P(11)});          // retired query_prefetch_lookup_hits
  Send({P(93), P(22), "\xc1"});  // not msgpack
  Send({P(94)});                 // a uid alone: LMCache's own server stops answering after it
  Send({P(95), "", "ack"});      // a stream's control message: no reply either
  Send({P(96), P(24)});          // noop
  EXPECT_EQ(Receive(), (Frames{P(96), P(24), P("OK")}));
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "unknown_op"}}), 1);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "part_count"}}), 1);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "unsupported_op"}}), 1);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "bad_msgpack"}}), 1);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "bad_frame"}}), 1);
}

TEST_F(LmcacheFrontTest, WrappersItCannotOpenAreAnsweredButRefused) {
  ShmTensor layer(0);
  // A wrapper type no kvtier serves: refused by name (so is "cuda" where built without CUDA).
  EXPECT_FALSE(Call(1, RegisterArgs({layer.Descriptor("cuda_vmm")})));  // answered, not registered
  EXPECT_EQ(ctx_->workers.Count(), 0u);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "unsupported_wrapper"}}),
            1);
  // "cuda" on a device that is no GPU ("cpu"): the CUDA registration refuses it.
  EXPECT_FALSE(Call(1, RegisterArgs({layer.Descriptor("cuda")})));
  EXPECT_EQ(ctx_->workers.Count(), 0u);
  EXPECT_EQ(Counter("kvtier_lmcache_refused_requests_total", {{"reason", "unsupported_wrapper"}}) +
                Counter("kvtier_lmcache_failed_requests_total", {{"op", "register_kv_cache"}}),
            2);
  EXPECT_FALSE(CallTransfer(
      6, {Key(Tokens(kChunk), 0, kChunk, "s", 0), P(kInstance), Blocks({1, 2}), Bin("")}));
  EXPECT_EQ(Counter("kvtier_lmcache_failed_requests_total", {{"op", "store"}}), 1);
}

TEST_F(LmcacheFrontTest, ShmNamesOutsideLmcachesAreNotMapped) {
  ShmTensor layer(0);
  std::string desc = layer.Descriptor();
  const size_t at = desc.find("/lmcache_kv_");
  desc.replace(at, 3, "/xx");  // same length: the msgpack str header still fits
  EXPECT_FALSE(Call(1, RegisterArgs({desc})));
  EXPECT_EQ(ctx_->workers.Count(), 0u);
  EXPECT_EQ(Counter("kvtier_lmcache_failed_requests_total", {{"op", "register_kv_cache"}}), 1);
}

TEST_F(LmcacheFrontTest, TensorParallelRanksRegisterAtTheirFirstTransfer) {
  // Two workers of a world of 2; the registration names no rank, the first STORE's key does.
  ShmTensor rank0(0), rank1(1);
  for (uint64_t i = 0; i < kLayerBytes; ++i) {
    rank0.data[i] = static_cast<uint8_t>(i * 3);
    rank1.data[i] = static_cast<uint8_t>(i * 5 + 1);
  }
  EXPECT_FALSE(Call(1, RegisterArgs({rank0.Descriptor()}, 100, 2)));
  EXPECT_FALSE(Call(1, RegisterArgs({rank1.Descriptor()}, 101, 2)));
  EXPECT_EQ(ctx_->workers.Count(), 0u);
  const auto tokens = Tokens(2 * kChunk);
  const std::string handle = Bin("stub_ipc_handle");
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "s0", 0, 2), P(100), Blocks({1, 2, 3, 4}), handle}));
  // Chunks only rank 0 holds are no hit for the model's world of 2.
  EXPECT_FALSE(Call(8, {Key(tokens, 0, 2 * kChunk, "half", std::nullopt, 2), P(2)}));
  std::optional<msgpack::object_handle> hits;
  for (int i = 0; i < 1000 && !hits; ++i) hits = Call(9, {P("half")});
  ASSERT_TRUE(hits);
  EXPECT_EQ(hits->get().as<int64_t>(), 0);
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "s1", 1, 2), P(101), Blocks({1, 2, 3, 4}), handle}));
  EXPECT_EQ(ctx_->workers.Count(), 2u);
  EXPECT_EQ((*ctx_->workers.Get(101))->rank, 1u);
  // A rank's instance keeps its rank.
  EXPECT_FALSE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "s1", 0, 2), P(101), Blocks({1, 2, 3, 4}), handle}));
  EXPECT_FALSE(Call(8, {Key(tokens, 0, 2 * kChunk, "all", std::nullopt, 2), P(2)}));
  hits.reset();
  for (int i = 0; i < 1000 && !hits; ++i) hits = Call(9, {P("all")});
  ASSERT_TRUE(hits);
  EXPECT_EQ(hits->get().as<int64_t>(), 2);
  // Each rank gets its own bytes back.
  const std::vector<uint8_t> want0(rank0.Block(0, 1), rank0.Block(0, 1) + kBlockBytes);
  const std::vector<uint8_t> want1(rank1.Block(0, 1), rank1.Block(0, 1) + kBlockBytes);
  EXPECT_TRUE(CallTransfer(
      7, {Key(tokens, 0, 2 * kChunk, "all", 0, 2), P(100), Blocks({9, 10, 11, 12}), handle, P(0)}));
  EXPECT_TRUE(CallTransfer(
      7, {Key(tokens, 0, 2 * kChunk, "all", 1, 2), P(101), Blocks({9, 10, 11, 12}), handle, P(0)}));
  EXPECT_EQ(std::vector<uint8_t>(rank0.Block(0, 9), rank0.Block(0, 9) + kBlockBytes), want0);
  EXPECT_EQ(std::vector<uint8_t>(rank1.Block(0, 9), rank1.Block(0, 9) + kBlockBytes), want1);
}

TEST_F(LmcacheFrontTest, FreeLookupLocksReleasesOnlyItsRange) {
  ShmTensor layer(0);
  EXPECT_FALSE(Call(1, RegisterArgs({layer.Descriptor()})));
  const auto tokens = Tokens(2 * kChunk);
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "s", 0), P(kInstance), Blocks({1, 2, 3, 4}), Bin("")}));
  EXPECT_FALSE(Call(8, {Key(tokens, 0, 2 * kChunk, "rid", std::nullopt), P(1)}));
  std::optional<msgpack::object_handle> hits;
  for (int i = 0; i < 1000 && !hits; ++i) hits = Call(9, {P("rid")});
  ASSERT_TRUE(hits);
  EXPECT_EQ(hits->get().as<int64_t>(), 2);
  auto pins = [this] {
    auto s = ctx_->sessions.Find("rid");
    std::lock_guard lock(s->mu);
    return s->lookup_pins.size();
  };
  EXPECT_EQ(pins(), 2u);
  // vLLM already holds the first chunk: its lock goes, the second's stays for the RETRIEVE.
  EXPECT_FALSE(Call(12, {Key(tokens, 0, kChunk, "rid", std::nullopt), P(1)}));
  EXPECT_EQ(pins(), 1u);
  EXPECT_FALSE(Call(12, {Key(tokens, kChunk, 2 * kChunk, "rid", std::nullopt), P(1)}));
  EXPECT_EQ(pins(), 0u);
}

TEST_F(LmcacheFrontTest, VllmFourDimensionalLayerViewsAreServed) {
  // vLLM 0.34's CPU layer view [blocks, heads, tokens, K|V]: each block one dense run of
  // 2 * kBlockBytes, whatever the order of its dimensions (HND here, NHD in the second layer).
  const int64_t block_elems = 2 * kBlockTokens * kHeads * kDim;
  ShmTensor hnd(0), nhd(1);
  for (uint64_t i = 0; i < kLayerBytes; ++i) {
    hnd.data[i] = static_cast<uint8_t>(i * 29 + 5);
    nhd.data[i] = static_cast<uint8_t>(i * 17 + 2);
  }
  const std::vector<std::string> descs{
      hnd.Descriptor("cpu_shm", {kBlocks, kHeads, kBlockTokens, 2 * kDim},
                     {block_elems, kBlockTokens * 2 * kDim, 2 * kDim, 1}),
      nhd.Descriptor("cpu_shm", {kBlocks, kHeads, kBlockTokens, 2 * kDim},
                     {block_elems, 2 * kDim, kHeads * 2 * kDim, 1})};
  EXPECT_FALSE(Call(1, RegisterArgs(descs)));
  ASSERT_EQ(ctx_->workers.Count(), 1u);
  const auto tokens = Tokens(2 * kChunk);
  const std::string handle = Bin("stub_ipc_handle");
  EXPECT_TRUE(CallTransfer(
      6, {Key(tokens, 0, 2 * kChunk, "w", 0), P(kInstance), Blocks({1, 2, 3, 4}), handle}));
  EXPECT_TRUE(CallTransfer(7, {Key(tokens, 0, 2 * kChunk, "r", 0), P(kInstance),
                               Blocks({20, 21, 22, 23}), handle, P(0)}));
  const uint64_t block_bytes = 2 * kBlockBytes;
  for (ShmTensor* t : {&hnd, &nhd}) {
    for (uint32_t i = 0; i < 4; ++i) {
      EXPECT_EQ(std::memcmp(t->data + (20 + i) * block_bytes, t->data + (1 + i) * block_bytes,
                            block_bytes),
                0)
          << t->name << " block " << 20 + i;
    }
  }
}

TEST_F(LmcacheFrontTest, WorkersThatStopPingingAreUnregistered) {
  ShmTensor layer(0);
  EXPECT_FALSE(Call(1, RegisterArgs({layer.Descriptor()})));
  const auto timeout = std::chrono::seconds(120);  // ServerConfig's lmcache_reap_timeout_s
  ASSERT_EQ(ctx_->config.lmcache_reap_timeout_s, 120);
  clock_.Advance(timeout - std::chrono::seconds(20));
  EXPECT_TRUE(Call(22, {P(kInstance)})->get().as<bool>());  // the worker's heartbeat
  clock_.Advance(timeout - std::chrono::seconds(20));
  EXPECT_TRUE(Call(22, {Nil()})->get().as<bool>());  // the scheduler's: refreshes no worker
  EXPECT_EQ(ctx_->workers.Count(), 1u);
  clock_.Advance(std::chrono::seconds(40));
  // The front's thread reaps once it next wakes (this ping wakes it); it may answer requests of
  // the same batch first, so wait for its work rather than for a reply.
  EXPECT_TRUE(Call(22, {Nil()})->get().as<bool>());
  EXPECT_TRUE(testing::Eventually([this] { return ctx_->workers.Count() == 0; }))
      << "the silent worker was not reaped";
  EXPECT_EQ(Counter("kvtier_lmcache_reaped_workers_total", {}), 1);
}

}  // namespace
}  // namespace kvtier
