// The LMCache front's CUDA wrappers end to end on a GPU: a child process is the vLLM worker (it
// cudaMallocs its KV cache, exports it as torch does and records an interprocess event); this
// process is the server side: it decodes the register_kv_cache frame the client would send
// (lmcache_codec.h), registers the worker through RegisterWorker (lmcache_registration.h), then
// STOREs and RETRIEVEs through the GPU path after the worker's event (lmcache_cuda_region.h,
// transfer_handlers.h), writing and reading the worker's memory through the opened handles, and
// checks every byte of it. K/V-first NHD and HND, blocks-first and MLA tensors, for the "cuda"
// (torch's share) and "cuda_raw" wrappers. Skipped, saying why, where no GPU is usable;
// tests/gpu/run.sh runs it on a GPU machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/process/child.h"
#include "common/process/readiness.h"
#include "cuda/gpu_memory.h"
#include "lmcache_cuda_frames.h"
#include "server/lmcache_codec.h"
#include "server/lmcache_cuda_region.h"
#include "server/lmcache_registration.h"
#include "server/transfer_handlers.h"
#include "unit/server/reply_decode.h"

namespace kvtier::testing {
namespace {

#define SKIP_WITHOUT_GPU()                           \
  if (Status gpu = cuda::Available(); !gpu.ok())     \
  GTEST_SKIP() << "no usable GPU (" << gpu.message() \
               << "): the CUDA path is compiled; tests/gpu/run.sh runs this on a GPU machine"

constexpr int64_t kLayers = 2, kBlocks = 16, kBlockTokens = 16, kHeads = 2, kHeadDim = 64;
constexpr uint32_t kChunk = 32;      // two blocks
constexpr uint64_t kElem = 2;        // bf16
constexpr uint64_t kAllocPad = 512;  // the storage sits inside its allocation, as torch's do
constexpr uint64_t kInstance = 4242;
constexpr int64_t kBlockElems = kBlockTokens * kHeads * kHeadDim;  // one of K or V

std::string ToHex(const std::string& b) {
  std::string out;
  char buf[3];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The child: the worker's KV cache in its GPU memory, exported, until it is stopped.
TEST(LmcacheCudaWorkerChild, ExportsAndWaits) {
  const char* bytes = std::getenv("KVTIER_LMCACHE_GPU_CHILD_BYTES");
  if (bytes == nullptr) GTEST_SKIP() << "run by LmcacheCuda tests only";
  const uint64_t size = std::strtoull(bytes, nullptr, 10);
  auto memory = cuda::DeviceBuffer::Allocate(kAllocPad + size);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  auto e = cuda::ExportRange((*memory)->data() + kAllocPad, size);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto event = cuda::IpcEvent::Create();
  ASSERT_TRUE(event.ok()) << event.status().ToString();
  ASSERT_TRUE((*event)->Record().ok());  // what the engine does after its forward pass
  std::printf("export %s %llu %s %s\n", ToHex(e->handle).c_str(),
              static_cast<unsigned long long>(e->offset), e->device_uuid.c_str(),
              ToHex((*event)->handle()).c_str());
  std::fflush(stdout);
  while (true) ::pause();
}

struct Exported {
  std::string handle;
  uint64_t offset = 0;  // of the storage in its allocation
  std::string device_uuid;
  std::string event;
};

// How one attention layout lays a layer's tensor out, and where its blocks are.
struct Case {
  const char* name;
  const char* kv_layout;  // layout_hints
  std::vector<int64_t> shape;
  bool kv_first;  // [2, blocks, ...]; else blocks first ([blocks, 2, ...], or MLA)
  bool mla;       // one latent per token instead of K and V
  int64_t LayerElems() const { return (mla ? 1 : 2) * kBlocks * kBlockElems; }
  // Element of (kv, block)'s first byte inside a layer.
  int64_t BlockStart(int64_t kv, int64_t block) const {
    if (mla) return block * kBlockElems;
    return kv_first ? kv * kBlocks * kBlockElems + block * kBlockElems
                    : block * 2 * kBlockElems + kv * kBlockElems;
  }
};

std::vector<int64_t> Contiguous(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size() - 1; d > 0; --d) s[d - 1] = s[d] * shape[d];
  return s;
}

std::vector<Case> Cases() {
  return {
      {"kv_first_nhd", "NHD", {2, kBlocks, kBlockTokens, kHeads, kHeadDim}, true, false},
      {"kv_first_hnd", "HND", {2, kBlocks, kHeads, kBlockTokens, kHeadDim}, true, false},
      {"blocks_first_nhd", "NHD", {kBlocks, 2, kBlockTokens, kHeads, kHeadDim}, false, false},
      {"mla", "NHD", {kBlocks, kBlockTokens, kHeads * kHeadDim}, false, true},
  };
}

class LmcacheCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig cfg;
    cfg.chunk_size = kChunk;
    ctx_ = std::make_unique<ServerContext>(cfg, HashAlgo::kXxh3);
    L1Options o;
    o.capacity_bytes = 64ull << 20;
    o.prefault = false;
    o.huge_pages = false;
    o.metrics = &ctx_->metrics;
    ctx_->l1 = std::move(L1Pool::Create(o)).value();
    counters_ = std::make_unique<TransferCounters>(ctx_->metrics);
  }

  void TearDown() override {
    (void)ctx_->workers.Unregister(kInstance);  // an unfinished case's worker, before its exit
    child_.Stop();
    // The registration page-locked L1 for DMA; a server keeps it so, this test frees it.
    if (ctx_->l1_pinned) {
      EXPECT_TRUE(cuda::UnpinHostMemory(ctx_->l1->ArenaBase()).ok());
    }
  }

  Exported SpawnWorker(uint64_t bytes) {
    process::SpawnSpec spec;
    spec.program = "/proc/self/exe";
    spec.argv = {"gpu_tests", "--gtest_filter=LmcacheCudaWorkerChild.ExportsAndWaits"};
    spec.env = {"KVTIER_LMCACHE_GPU_CHILD_BYTES=" + std::to_string(bytes)};
    auto child = process::Child::Spawn(spec);
    if (!child.ok()) throw std::runtime_error(child.status().ToString());
    child_ = std::move(child).value();
    const Status up = process::WaitReady(
        child_, [&] { return !ExportLine().empty(); }, std::chrono::seconds(60), "the GPU worker");
    if (!up.ok()) throw std::runtime_error(up.ToString());  // it carries the child's log tail
    std::istringstream in(ExportLine());
    std::string word, handle, event;
    Exported e;
    in >> word >> handle >> e.offset >> e.device_uuid >> event;
    e.handle = FromHex(handle);
    e.event = FromHex(event);
    return e;
  }

  std::string ExportLine() const {
    const std::string log = child_.Log();
    const size_t at = log.find("export ");
    if (at == std::string::npos) return "";
    const size_t end = log.find('\n', at);
    return end == std::string::npos ? "" : log.substr(at, end - at);
  }

  // The decoded registration and each tensor's ext payload, as the front hands them over.
  Status Register(const Case& c, bool raw, const Exported& e) {
    std::vector<std::string> payloads;
    const uint64_t layer_bytes = c.LayerElems() * kElem;
    for (int64_t l = 0; l < kLayers; ++l) {
      TensorView v;
      v.shape = c.shape;
      v.stride = Contiguous(c.shape);
      v.device_uuid = e.device_uuid;
      if (raw) {
        payloads.push_back(RawPayload(v, e.handle, e.offset + l * layer_bytes, layer_bytes));
      } else {
        v.storage_offset = l * c.LayerElems();
        payloads.push_back(CudaPayload(v, e.handle, kLayers * layer_bytes, e.offset, e.event));
      }
    }
    const auto frames = RegisterFrames(kInstance, payloads, kBlockTokens, c.kv_layout);
    const std::vector<std::string_view> views(frames.begin(), frames.end());
    const lmcache::Decoded d = lmcache::Decode(views);
    if (const auto* r = std::get_if<lmcache::Refusal>(&d)) {
      return Status(Code::kInvalidArgument, "the front refused the frame: " + r->detail);
    }
    const auto& reg = std::get<lmcache::RegisterKvCache>(std::get<lmcache::Request>(d).args);
    const std::vector<std::string_view> wires(payloads.begin(), payloads.end());
    return lmcache::RegisterWorker(*ctx_, reg, wires, 0);
  }

  // The whole storage (both layers) through the server's opened handles; buffer i starts at
  // storage byte `starts[i]`.
  void Upload(const std::vector<uint8_t>& image, const std::vector<uint64_t>& starts) {
    auto w = ctx_->workers.Get(kInstance);
    ASSERT_TRUE(w.ok());
    const cuda::IpcMemory& m = *(*w)->gpu;
    for (size_t i = 0; i < m.count(); ++i) {
      ASSERT_TRUE(m.CopyAndWait({{m.data(i), image.data() + starts[i], m.size(i)}}, false).ok());
    }
  }
  std::vector<uint8_t> Download(uint64_t bytes, const std::vector<uint64_t>& starts) {
    std::vector<uint8_t> image(bytes, 0xee);
    auto w = ctx_->workers.Get(kInstance);
    EXPECT_TRUE(w.ok());
    if (!w.ok()) return image;
    const cuda::IpcMemory& m = *(*w)->gpu;
    for (size_t i = 0; i < m.count(); ++i) {
      EXPECT_TRUE(m.CopyAndWait({{image.data() + starts[i], m.data(i), m.size(i)}}, false).ok());
    }
    return image;
  }

  // STORE or RETRIEVE of `tokens` with `blocks`, after the worker's event, as the front runs it.
  template <typename Reply>
  Reply Transfer(bool store, const std::string& event, const std::vector<uint32_t>& blocks,
                 uint64_t skip = 0) {
    auto w = ctx_->workers.Get(kInstance);
    EXPECT_TRUE(w.ok());
    if (!w.ok()) return Reply{};
    const Status waited = lmcache::WaitForClientEvent(**w, event);
    EXPECT_TRUE(waited.ok()) << waited.ToString();
    wire::TransferRequest req;
    req.instance_id = kInstance;
    req.key.request_id = "r";
    // Tokens of their own per layout: L1 keeps what the layouts before stored.
    for (uint32_t t = 0; t < 2 * kChunk; ++t) req.key.tokens.push_back(1000 * round_ + t);
    req.block_ids = blocks;
    req.skip_first_n_tokens = skip;
    wire::BodyWriter body;
    req.Encode(body);
    const std::string bytes = body.Finish();
    auto reader = wire::BodyReader::Parse(bytes.data(), bytes.size());
    EXPECT_TRUE(reader.ok());
    wire::BodyWriter reply;
    const Status s = store ? HandleStore(*ctx_, *counters_, *reader, reply)
                           : HandleRetrieve(*ctx_, *counters_, *reader, reply);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return DecodeReply<Reply>(reply.Finish());
  }

  void StoreAndRetrieveEveryByte(const Case& c, bool raw) {
    SCOPED_TRACE(std::string(c.name) + (raw ? " cuda_raw" : " cuda"));
    ++round_;
    const uint64_t layer_bytes = c.LayerElems() * kElem;
    const uint64_t bytes = kLayers * layer_bytes;
    const Exported e = SpawnWorker(bytes);
    const Status registered = Register(c, raw, e);
    ASSERT_TRUE(registered.ok()) << registered.ToString();
    std::vector<uint64_t> starts;  // each buffer's first byte in the storage
    for (int64_t l = 0; l < kLayers; ++l) starts.push_back(raw ? l * layer_bytes : 0);

    std::vector<uint8_t> before(bytes), after(bytes);
    for (uint64_t i = 0; i < bytes; ++i) {
      before[i] = static_cast<uint8_t>(i * 131 + i / 251 + 7);
      after[i] = static_cast<uint8_t>(i * 29 + i / 509 + 101);
    }
    const std::vector<uint32_t> from = {5, 2, 9, 14}, to = {0, 7, 3, 11};
    Upload(before, starts);
    const auto stored = Transfer<wire::StoreReply>(true, e.event, from);
    EXPECT_EQ(stored.stored_chunks, 2u);
    // Other bytes everywhere, then the chunks back into other blocks, the first block skipped
    // (the engine's own prefix cache holds it).
    Upload(after, starts);
    const auto got = Transfer<wire::RetrieveReply>(false, e.event, to, kBlockTokens);
    EXPECT_EQ(got.retrieved_chunks, 2u);

    std::vector<uint8_t> expect = after;
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int64_t kv = 0; kv < (c.mla ? 1 : 2); ++kv) {
        for (size_t i = 1; i < to.size(); ++i) {
          const uint64_t dst = (l * c.LayerElems() + c.BlockStart(kv, to[i])) * kElem;
          const uint64_t src = (l * c.LayerElems() + c.BlockStart(kv, from[i])) * kElem;
          std::memcpy(expect.data() + dst, before.data() + src, kBlockElems * kElem);
        }
      }
    }
    const std::vector<uint8_t> image = Download(bytes, starts);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < bytes; ++i) wrong += image[i] != expect[i];
    EXPECT_EQ(wrong, 0u) << "of " << bytes << " bytes";
    ASSERT_TRUE(ctx_->workers.Unregister(kInstance).ok());
    child_.Stop();
  }

  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<TransferCounters> counters_;
  process::Child child_;  // stopped by its destructor at the latest
  uint32_t round_ = 0;
};

TEST_F(LmcacheCudaTest, TorchSharedKvCacheEveryLayout) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : Cases()) StoreAndRetrieveEveryByte(c, false);
}

TEST_F(LmcacheCudaTest, RawIpcKvCacheEveryLayout) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : Cases()) StoreAndRetrieveEveryByte(c, true);
}

TEST_F(LmcacheCudaTest, UnknownDeviceUuidIsRefused) {
  SKIP_WITHOUT_GPU();
  Exported e;
  e.handle = std::string(cuda::kIpcHandleBytes, '\1');
  e.offset = kAllocPad;
  e.device_uuid = "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff";
  e.event = std::string(cuda::kIpcHandleBytes, '\2');
  const Status s = Register(Cases()[0], false, e);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("UUID"), std::string::npos) << s.ToString();
  EXPECT_EQ(ctx_->workers.Count(), 0u);
}

TEST_F(LmcacheCudaTest, AStubEventIsRefusedAndTheWorkersEventIsWaitedFor) {
  SKIP_WITHOUT_GPU();
  const Case c = Cases()[0];
  const Exported e = SpawnWorker(kLayers * c.LayerElems() * kElem);
  ASSERT_TRUE(Register(c, false, e).ok());
  auto w = ctx_->workers.Get(kInstance);
  ASSERT_TRUE(w.ok());
  // The CPU client's stub: not 64 bytes, so not waited for blindly.
  EXPECT_EQ(lmcache::WaitForClientEvent(**w, "stub_ipc_handle").code(), Code::kInvalidArgument);
  EXPECT_TRUE(lmcache::WaitForClientEvent(**w, e.event).ok());
}

}  // namespace
}  // namespace kvtier::testing
