// LMCache's CUDA IPC wrappers ("cuda", "cuda_raw") decoded from the frames the unchanged
// lmcache 0.5.6 client sends, and their registration refused where it cannot work (no CUDA, no
// GPU, a device UUID that is not a GPU's). The kv_cache parts below are lmcache's own encoding:
// in the engines venv, CudaIPCWrapper.from_wire(CudaIPCData(...)) and
// RawCudaIPCWrapper.from_wire(RawCudaIPCData(...)) encoded by
// multiprocess.custom_types.get_customized_encoder(None).encode([...]), with the values that
// kCudaKvCache's and kRawKvCache's comments name.
#include "server/lmcache_cuda_wrapper.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>
#include <string>
#include <vector>

#include "cuda/gpu_memory.h"
#include "hex_bytes.h"
#include "server/lmcache_cuda_region.h"
#include "server/lmcache_registration.h"

namespace kvtier::lmcache {
namespace {

using testing::Hex;

std::string Bytes(int from, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) s.push_back(static_cast<char>(from + i));
  return s;
}

constexpr std::string_view kUuid = "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";

// Two bf16 layers (2, 8, 16, 2, 4), strides (1024, 128, 8, 4, 1), in one storage of 8192 bytes
// at byte 512 of its allocation, storage_offset 0 and 2048; handle[1] = b"\x03c" + bytes(0..63),
// ref counter b"/torch_1234_5678_0" at 0 and 16, event bytes(64..127), sync required.
constexpr std::string_view kCudaKvCache =
    "92c8013a0184a474797065a463756461a668616e646c659800c4420363000102030405060708090a0b0c0d0e0f"
    "101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c"
    "3d3e3fcd2000cd0200c4122f746f7263685f313233345f353637385f3000c440404142434445464748494a4b4c"
    "4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717273747576777879"
    "7a7b7c7d7e7fc3a776657273696f6e01a86d6574616461746185a56474797065a862666c6f61743136a5736861"
    "7065950208100204a673747269646595cd0400cc80080401ae73746f726167655f6f666673657400ab64657669"
    "63655f75756964d9284750552d30613162326333642d346535662d363037312d383239332d6134623563366437"
    "65386639c8013c0184a474797065a463756461a668616e646c659800c4420363000102030405060708090a0b0c"
    "0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839"
    "3a3b3c3d3e3fcd2000cd0200c4122f746f7263685f313233345f353637385f3010c44040414243444546474849"
    "4a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717273747576"
    "7778797a7b7c7d7e7fc3a776657273696f6e01a86d6574616461746185a56474797065a862666c6f61743136a5"
    "7368617065950208100204a673747269646595cd0400cc80080401ae73746f726167655f6f6666736574cd0800"
    "ab6465766963655f75756964d9284750552d30613162326333642d346535662d363037312d383239332d613462"
    "356336643765386639";

// One fp16 layer (8, 2, 2, 16, 4), contiguous, ipc_handle bytes(0..63), alloc_offset 4096,
// nbytes 4096.
constexpr std::string_view kRawKvCache =
    "91c7f90186a474797065a8637564615f726177aa6970635f68616e646c65c440000102030405060708090a0b0c"
    "0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839"
    "3a3b3c3d3e3fac616c6c6f635f6f6666736574cd1000a66e6279746573cd1000a776657273696f6e01a86d6574"
    "616461746185a56474797065a7666c6f61743136a57368617065950802021004a673747269646595cd0100cc80"
    "400401ae73746f726167655f6f666673657400ab6465766963655f75756964d9284750552d3061316232633364"
    "2d346535662d363037312d383239332d613462356336643765386639";

// The rest of register_kv_cache as the client sends it (lmcache_codec_test.cc): model
// "kvtier-reference", world size 1, "vllm", {"kv_layout": "NHD"}, one group of 16-token blocks.
constexpr std::string_view kModel = "b06b76746965722d7265666572656e6365";
constexpr std::string_view kGroups =
    "9186af656e67696e655f67726f75705f696400ad6c617965725f696e6469636573920001b0746f6b656e735f7065"
    "725f626c6f636b10ae73775f73697a655f746f6b656e73ffb665787472615f6f626a6563745f67726f75705f7461"
    "6700af726563757272656e745f7374617465c2";

struct Registration {
  RegisterKvCache reg;
  std::vector<std::string> wires;  // each tensor's ext-1 payload
  std::vector<std::string_view> Views() const { return {wires.begin(), wires.end()}; }
};

// The frame through the front's decoder, and the ext payloads out of its kv_cache part (what
// the codec keeps of them is the view; the handles are this test's subject).
Registration FromFrame(const std::string& kv_cache_hex) {
  std::vector<std::string> frames = {
      Hex("02"),   Hex("01"), Hex("cd1092"),     Hex(kv_cache_hex),
      Hex(kModel), Hex("01"), Hex("a4766c6c6d"), Hex("81a96b765f6c61796f7574a34e4844"),
      Hex(kGroups)};
  std::vector<std::string_view> views(frames.begin(), frames.end());
  Registration out;
  const Decoded d = Decode(views);
  const auto* req = std::get_if<Request>(&d);
  if (req == nullptr) {
    ADD_FAILURE() << "refused: " << std::get<Refusal>(d).detail;
    return out;
  }
  out.reg = std::get<RegisterKvCache>(req->args);
  const auto part = msgpack::unpack(frames[3].data(), frames[3].size());
  for (uint32_t i = 0; i < part->via.array.size; ++i) {
    const auto& ext = part->via.array.ptr[i].via.ext;
    out.wires.emplace_back(ext.data(), ext.size);
  }
  return out;
}

std::string CudaFrame() { return std::string(kCudaKvCache); }

// A "cuda" payload packed field by field as msgspec packs CudaIPCData, with `handle` replaced.
template <typename PackHandle>
std::string CudaPayload(PackHandle pack_handle, const char* extra_field = nullptr) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(extra_field ? 5 : 4);
  pk.pack("type");
  pk.pack("cuda");
  pk.pack("handle");
  pack_handle(pk);
  pk.pack("version");
  pk.pack(1);
  pk.pack("metadata");
  pk.pack_map(0);  // the codec's; not read here
  if (extra_field) {
    pk.pack(extra_field);
    pk.pack(0);
  }
  return std::string(buf.data(), buf.size());
}

void PackBin(msgpack::packer<msgpack::sbuffer>& pk, const std::string& b) {
  pk.pack_bin(static_cast<uint32_t>(b.size()));
  pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
}

// torch's 8-tuple with storage handle `storage` and event `event` ("" packs None).
auto TorchShare(std::string storage, std::string event = Bytes(64, 64), bool sync = true) {
  return [=](msgpack::packer<msgpack::sbuffer>& pk) {
    pk.pack_array(8);
    pk.pack(0);
    if (storage.empty()) {
      pk.pack_nil();
    } else {
      PackBin(pk, storage);
    }
    pk.pack(8192);
    pk.pack(512);
    PackBin(pk, "/torch_1234_5678_0");
    pk.pack(0);
    if (event.empty()) {
      pk.pack_nil();
    } else {
      PackBin(pk, event);
    }
    pk.pack(sync);
  };
}

TensorDesc CudaDesc() {
  TensorDesc d;
  d.type = "cuda";
  d.device_uuid = std::string(kUuid);
  return d;
}

TEST(LmcacheCudaWrapperTest, DecodesTorchsShareFromTheClientsFrame) {
  const Registration r = FromFrame(CudaFrame());
  ASSERT_EQ(r.reg.kv_cache.size(), 2u);
  ASSERT_EQ(r.wires.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TensorDesc& t = r.reg.kv_cache[i];
    EXPECT_EQ(t.type, "cuda");
    EXPECT_EQ(t.dtype, "bfloat16");
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 8, 16, 2, 4}));
    EXPECT_EQ(t.stride, (std::vector<int64_t>{1024, 128, 8, 4, 1}));
    EXPECT_EQ(t.storage_offset, static_cast<int64_t>(2048 * i));
    auto b = DecodeCudaBuffer(t, r.wires[i]);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->memory.handle, Bytes(0, 64)) << "the 64 bytes after torch's version and 'c'";
    EXPECT_EQ(b->memory.offset, 512u);
    EXPECT_EQ(b->memory.size, 8192u);
    EXPECT_EQ(b->memory.device_uuid, kUuid);
    EXPECT_EQ(b->ready_event, Bytes(64, 64));
  }
  // This test's packer writes what lmcache's encoder wrote (so the refusals below are of
  // payloads the client could send), metadata aside.
  const std::string packed =
      CudaPayload(TorchShare("\x03"
                             "c" +
                             Bytes(0, 64)));
  EXPECT_EQ(r.wires[0].substr(0, r.wires[0].find("metadata")),
            packed.substr(0, packed.find("metadata")));
}

TEST(LmcacheCudaWrapperTest, DecodesTheRawWrapperFromTheClientsFrame) {
  const Registration r = FromFrame(std::string(kRawKvCache));
  ASSERT_EQ(r.reg.kv_cache.size(), 1u);
  const TensorDesc& t = r.reg.kv_cache[0];
  EXPECT_EQ(t.type, "cuda_raw");
  EXPECT_EQ(t.dtype, "float16");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{8, 2, 2, 16, 4}));
  auto b = DecodeCudaBuffer(t, r.wires[0]);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->memory.handle, Bytes(0, 64));
  EXPECT_EQ(b->memory.offset, 4096u);
  EXPECT_EQ(b->memory.size, 4096u);
  EXPECT_TRUE(b->ready_event.empty());
  // Its layout is the shared-memory registration's: blocks first, K and V in each block.
  auto layout = LayoutOf(r.reg.kv_cache, 16);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->num_blocks, 8u);
  EXPECT_EQ(layout->block_bytes, 256u);
  ASSERT_EQ(layout->regions.size(), 2u);
  EXPECT_EQ(layout->regions[1].offset, 256u);
  EXPECT_EQ(layout->regions[1].block_stride, 512u);
}

TEST(LmcacheCudaWrapperTest, TorchsOtherVersionsAndNoEventAreAccepted) {
  for (char version : {'\x01', '\x02', '\x03'}) {
    auto b = DecodeCudaBuffer(CudaDesc(), CudaPayload(TorchShare(version + ("c" + Bytes(0, 64)))));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->memory.handle, Bytes(0, 64));
  }
  auto b = DecodeCudaBuffer(CudaDesc(), CudaPayload(TorchShare("\x03"
                                                               "c" +
                                                                   Bytes(0, 64),
                                                               "")));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->ready_event.empty());
  b = DecodeCudaBuffer(CudaDesc(), CudaPayload(TorchShare("\x03"
                                                          "c" +
                                                              Bytes(0, 64),
                                                          Bytes(1, 64), false)));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->ready_event.empty()) << "no sync required: nothing to wait for";
}

void ExpectRefused(const TensorDesc& d, const std::string& wire, std::string_view says) {
  auto b = DecodeCudaBuffer(d, wire);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
  EXPECT_NE(b.status().message().find(says), std::string::npos) << b.status().ToString();
}

TEST(LmcacheCudaWrapperTest, RefusesWhatItCannotOpen) {
  const std::string good =
      "\x03"
      "c" +
      Bytes(0, 64);
  ExpectRefused(CudaDesc(),
                CudaPayload(TorchShare("\x03"
                                       "e" +
                                       Bytes(0, 64))),
                "expandable segment");
  ExpectRefused(CudaDesc(),
                CudaPayload(TorchShare("\x03"
                                       "c" +
                                       Bytes(0, 63))),
                "65 bytes");
  ExpectRefused(CudaDesc(), CudaPayload(TorchShare("")), "no memory");
  ExpectRefused(CudaDesc(), CudaPayload(TorchShare(good, Bytes(0, 8))), "event handle is 8");
  ExpectRefused(CudaDesc(), CudaPayload(TorchShare(good), "fd"), "field 'fd' is unknown");
  ExpectRefused(CudaDesc(),
                CudaPayload([](msgpack::packer<msgpack::sbuffer>& pk) { pk.pack_array(0); }),
                "8-tuple");
  TensorDesc raw = CudaDesc();
  raw.type = "cuda_raw";
  ExpectRefused(raw, CudaPayload(TorchShare(good)), "field 'handle' is unknown");
  // The client's raw wrapper with a field renamed.
  const Registration r = FromFrame(std::string(kRawKvCache));
  std::string wire = r.wires[0];
  wire.replace(wire.find("alloc_offset"), 12, "alloc_offsex");
  ExpectRefused(raw, wire, "field 'alloc_offsex' is unknown");
  TensorDesc shm = CudaDesc();
  shm.type = "cpu_shm";
  ExpectRefused(shm, r.wires[0], "not a CUDA IPC wrapper");
}

TEST(LmcacheCudaRegionTest, WrapperTypesServedFollowTheBuild) {
  EXPECT_TRUE(ServedWrapper("cpu_shm"));
  EXPECT_EQ(ServedWrapper("cuda"), cuda::Built());
  EXPECT_EQ(ServedWrapper("cuda_raw"), cuda::Built());
  EXPECT_FALSE(ServedWrapper("cuda_vmm"));
  EXPECT_FALSE(ServedWrapper("npu"));
}

class LmcacheCudaRegisterTest : public ::testing::Test {
 protected:
  LmcacheCudaRegisterTest() : ctx_(Config(), HashAlgo::kXxh3) {}
  static ServerConfig Config() {
    ServerConfig cfg;
    cfg.chunk_size = 32;
    return cfg;
  }
  ServerContext ctx_;
};

TEST_F(LmcacheCudaRegisterTest, RefusedWithoutAUsableGpuAndNothingIsRegistered) {
  const Registration r = FromFrame(CudaFrame());
  const Status s = RegisterWorker(ctx_, r.reg, r.Views(), 0);
  ASSERT_FALSE(s.ok());
  if (!cuda::Available().ok()) {
    // This machine: the message says why (built without CUDA, or no device).
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    if (cuda::Built()) {
      EXPECT_EQ(s.message(), cuda::Available().message());
    } else {
      EXPECT_NE(s.message().find("built without CUDA"), std::string::npos) << s.ToString();
    }
  }  // A GPU machine cannot open these made-up handles either.
  EXPECT_EQ(ctx_.workers.Count(), 0u);
  EXPECT_EQ(ctx_.workers.PendingCount(), 0u);
}

TEST_F(LmcacheCudaRegisterTest, RefusesADeviceThatIsNoGpuBeforeAnyCudaCall) {
  Registration r = FromFrame(CudaFrame());
  r.reg.kv_cache[1].device_uuid = "cpu";
  const Status s = RegisterCudaWorker(ctx_, r.reg, r.Views(), 0);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("kv_cache[1]: device_uuid 'cpu'"), std::string::npos) << s.ToString();
  EXPECT_EQ(ctx_.workers.Count(), 0u);
}

TEST_F(LmcacheCudaRegisterTest, RefusesMixedWrappersAndMissingPayloads) {
  Registration r = FromFrame(CudaFrame());
  r.reg.kv_cache[1].type = "cpu_shm";
  Status s = RegisterWorker(ctx_, r.reg, r.Views(), 0);
  EXPECT_NE(s.message().find("mixes 'cuda' and 'cpu_shm'"), std::string::npos) << s.ToString();
  r = FromFrame(CudaFrame());
  s = RegisterCudaWorker(ctx_, r.reg, {r.wires[0]}, 0);
  EXPECT_EQ(s.code(), Code::kInternal) << s.ToString();
  r.reg.kv_cache[0].type = "cuda_vmm";
  r.reg.kv_cache[1].type = "cuda_vmm";
  s = RegisterWorker(ctx_, r.reg, r.Views(), 0);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("'cuda_vmm' wrappers are not served"), std::string::npos);
  EXPECT_EQ(ctx_.workers.Count(), 0u);
}

TEST_F(LmcacheCudaRegisterTest, AHostWorkerHasNoEventToWaitFor) {
  RegisteredWorker host;  // no gpu: the client's b"stub_ipc_handle" is not a CUDA event
  EXPECT_TRUE(WaitForClientEvent(host, "stub_ipc_handle").ok());
}

}  // namespace
}  // namespace kvtier::lmcache
