// The LMCache MP codec on frames recorded from the unchanged lmcache 0.5.6 client (its
// RequestClientFactory and lmcache-driven CPU transfer context, sending to a recording ROUTER the
// way tests/engines/test_lmcache_mp_reference.py drives LMCache's own server), and on frames
// that client would never send.
#include "server/lmcache_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hex_bytes.h"

namespace kvtier::lmcache {
namespace {

using testing::Hex;

// The recorded frames after the routing id: [uid, op, args...], as hex.
std::vector<std::string> Frames(std::initializer_list<std::string_view> hex) {
  std::vector<std::string> out;
  for (auto h : hex) out.push_back(Hex(h));
  return out;
}

Decoded DecodeFrames(const std::vector<std::string>& frames) {
  std::vector<std::string_view> views(frames.begin(), frames.end());
  return Decode(views);
}

template <typename T>
T Args(const Decoded& d, Op want) {
  const auto* req = std::get_if<Request>(&d);
  if (req == nullptr) {
    ADD_FAILURE() << "refused: " << std::get<Refusal>(d).reason << ": "
                  << std::get<Refusal>(d).detail;
    return T{};
  }
  EXPECT_EQ(req->op, want);
  const T* args = std::get_if<T>(&req->args);
  if (args == nullptr) {
    ADD_FAILURE() << "other argument type";
    return T{};
  }
  return *args;
}

Refusal Refused(const Decoded& d) {
  const auto* r = std::get_if<Refusal>(&d);
  if (r == nullptr) {
    ADD_FAILURE() << "decoded what should be refused";
    return {};
  }
  EXPECT_FALSE(r->detail.empty());
  return *r;
}

// register_kv_cache of two (2, 24, 16, 2, 8) bf16 layers on CPU shm, instance 4242.
constexpr std::string_view kDescLayer0 =
    "c7940185a474797065a76370755f73686da873686d5f6e616d65b32f6c6d63616368655f6b765f32363839325f30"
    "a66e6279746573cd6000a776657273696f6e01a86d6574616461746185a56474797065a862666c6f61743136a573"
    "68617065950218100208a673747269646595cd1800cd0100100801ae73746f726167655f6f666673657400ab6465"
    "766963655f75756964a3637075";
constexpr std::string_view kDescLayer1 =
    "c7940185a474797065a76370755f73686da873686d5f6e616d65b32f6c6d63616368655f6b765f32363839325f31"
    "a66e6279746573cd6000a776657273696f6e01a86d6574616461746185a56474797065a862666c6f61743136a573"
    "68617065950218100208a673747269646595cd1800cd0100100801ae73746f726167655f6f666673657400ab6465"
    "766963655f75756964a3637075";
constexpr std::string_view kModel = "b06b76746965722d7265666572656e6365";  // "kvtier-reference"
constexpr std::string_view kGroups =
    "9186af656e67696e655f67726f75705f696400ad6c617965725f696e6469636573920001b0746f6b656e735f7065"
    "725f626c6f636b10ae73775f73697a655f746f6b656e73ffb665787472615f6f626a6563745f67726f75705f7461"
    "6700af726563757272656e745f7374617465c2";
// IPCCacheServerKey of 101 tokens 1..101, [0, 96), request "r"; worker_id 0 or nil.
constexpr std::string_view kKeyHead =
    "8aaa6d6f64656c5f6e616d65b06b76746965722d7265666572656e6365aa776f726c645f73697a6501a9776f726b"
    "65725f6964";
constexpr std::string_view kKeyTail =
    "a9746f6b656e5f696473dc00650102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021"
    "22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f"
    "505152535455565758595a5b5c5d5e5f606162636465a5737461727400a3656e6460aa726571756573745f6964a1"
    "72aa63616368655f73616c74a0af726571756573745f636f6e66696773c0ae6e756d5f6b765f7265616465727301";

// An ext 1 (ext 8 encoding) around a msgpack map, both as hex.
std::string Ext1(const std::string& map_hex) {
  const size_t n = map_hex.size() / 2;
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("c7") + kDigits[n >> 4] + kDigits[n & 15] + "01" + map_hex;
}

// The descriptor map of kDescLayer0 without its five-entry header ("c7 94 01 85").
std::string DescFields() { return std::string(kDescLayer0.substr(8)); }

std::string Key(bool worker) {
  return std::string(kKeyHead) + (worker ? "00" : "c0") + std::string(kKeyTail);
}

std::vector<std::string> RegisterFrames() {
  return Frames({"02", "01", "cd1092", "92" + std::string(kDescLayer0) + std::string(kDescLayer1),
                 kModel, "01", "a4766c6c6d", "81a96b765f6c61796f7574a34e4844", kGroups});
}

TEST(LmcacheCodecTest, DecodesTheClientsRegistration) {
  const auto reg = Args<RegisterKvCache>(DecodeFrames(RegisterFrames()), Op::kRegisterKvCache);
  EXPECT_EQ(reg.instance_id, 4242u);
  EXPECT_EQ(reg.model_name, "kvtier-reference");
  EXPECT_EQ(reg.world_size, 1u);
  EXPECT_EQ(reg.engine_type, "vllm");
  EXPECT_EQ(reg.kv_layout, "NHD");
  ASSERT_EQ(reg.groups.size(), 1u);
  EXPECT_EQ(reg.groups[0].tokens_per_block, 16u);
  EXPECT_EQ(reg.groups[0].layer_indices, (std::vector<uint32_t>{0, 1}));
  ASSERT_EQ(reg.kv_cache.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TensorDesc& d = reg.kv_cache[i];
    EXPECT_EQ(d.type, "cpu_shm");
    EXPECT_EQ(d.dtype, "bfloat16");
    EXPECT_EQ(d.shape, (std::vector<int64_t>{2, 24, 16, 2, 8}));
    EXPECT_EQ(d.stride, (std::vector<int64_t>{6144, 256, 16, 8, 1}));
    EXPECT_EQ(d.storage_offset, 0);
    EXPECT_EQ(d.device_uuid, "cpu");
    EXPECT_EQ(d.shm_name, "/lmcache_kv_26892_" + std::to_string(i));
    EXPECT_EQ(d.nbytes, 24576u);
  }
}

TEST(LmcacheCodecTest, DecodesStoreAndRetrieve) {
  const auto store =
      Args<Transfer>(DecodeFrames(Frames({"03", "06", Key(true), "cd1092", "9196010203040506",
                                          "c40f737475625f6970635f68616e646c65"})),
                     Op::kStore);
  EXPECT_EQ(store.instance_id, 4242u);
  EXPECT_EQ(store.key.model_name, "kvtier-reference");
  EXPECT_EQ(store.key.worker_id, 0u);
  ASSERT_EQ(store.key.token_ids.size(), 101u);
  EXPECT_EQ(store.key.token_ids.front(), 1u);
  EXPECT_EQ(store.key.token_ids.back(), 101u);
  EXPECT_EQ(store.key.start, 0u);
  EXPECT_EQ(store.key.end, 96u);
  EXPECT_EQ(store.key.request_id, "r");
  EXPECT_EQ(store.key.cache_salt, "");
  EXPECT_EQ(store.block_ids, (std::vector<std::vector<uint32_t>>{{1, 2, 3, 4, 5, 6}}));
  EXPECT_EQ(store.event_handle, "stub_ipc_handle");

  const auto retrieve =
      Args<Transfer>(DecodeFrames(Frames({"07", "07", Key(true), "cd1092", "9196121314151617",
                                          "c40f737475625f6970635f68616e646c65", "10"})),
                     Op::kRetrieve);
  EXPECT_EQ(retrieve.block_ids, (std::vector<std::vector<uint32_t>>{{18, 19, 20, 21, 22, 23}}));
  EXPECT_EQ(retrieve.skip_first_n_tokens, 16u);
}

TEST(LmcacheCodecTest, DecodesTheSchedulersOperations) {
  const auto lookup =
      Args<KeyArg>(DecodeFrames(Frames({"04", "08", Key(false), "01"})), Op::kLookup);
  EXPECT_FALSE(lookup.key.worker_id.has_value());
  EXPECT_EQ(lookup.tp_size, 1u);
  Args<KeyArg>(DecodeFrames(Frames({"06", "0c", Key(false), "01"})), Op::kFreeLookupLocks);
  EXPECT_EQ(Args<RequestIdArg>(DecodeFrames(Frames({"05", "09", "a172"})), Op::kQueryPrefetchStatus)
                .request_id,
            "r");
  EXPECT_EQ(
      Args<RequestIdArg>(DecodeFrames(Frames({"08", "0d", "a172"})), Op::kEndSession).request_id,
      "r");
  Args<NoArgs>(DecodeFrames(Frames({"00", "15"})), Op::kGetChunkSize);
  EXPECT_FALSE(
      Args<PingArg>(DecodeFrames(Frames({"01", "16", "c0"})), Op::kPing).instance_id.has_value());
  EXPECT_EQ(Args<PingArg>(DecodeFrames(Frames({"01", "16", "cd1092"})), Op::kPing).instance_id,
            4242u);
  EXPECT_FALSE(Args<ClearArg>(DecodeFrames(Frames({"09", "14", "c2"})), Op::kClear).force);
  EXPECT_EQ(Args<InstanceArg>(DecodeFrames(Frames({"0a", "02", "cd1092"})), Op::kUnregisterKvCache)
                .instance_id,
            4242u);
  // subscribe_kv_events travels as its name: [4242, "kvtier-reference", 0, 64].
  const auto sub = Args<SubscribeKvEvents>(DecodeFrames(Frames({"0b",
                                                                "b3737562736372696265"
                                                                "5f6b765f6576656e7473",
                                                                "cd1092", kModel, "00", "40"})),
                                           Op::kSubscribeKvEvents);
  EXPECT_EQ(sub.max_events, 64u);
}

TEST(LmcacheCodecTest, StreamControlFramesAreNotRequests) {
  const Decoded d = DecodeFrames({Hex("0b"), "", "ack"});
  ASSERT_TRUE(std::holds_alternative<StreamControl>(d));
  EXPECT_EQ(std::get<StreamControl>(d).command, "ack");
  EXPECT_EQ(Refused(DecodeFrames({Hex("0b"), "", "stop"})).reason, "bad_frame");
}

TEST(LmcacheCodecTest, RefusesWhatLmcache056WouldNotSend) {
  // The frames LMCache's own server drops in the reference test.
  EXPECT_EQ(Refused(DecodeFrames(Frames({"01", "b16e6f5f737563685f6f7065726174696f6e"}))).reason,
            "unknown_op");  // unknown name
  EXPECT_EQ(Refused(DecodeFrames(Frames({"02", "15", "00"}))).reason, "part_count");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"03", "0b"}))).reason, "unsupported_op");  // retired
  EXPECT_EQ(Refused(DecodeFrames(Frames({"04", "16", "c1"}))).reason, "bad_msgpack");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"05"}))).reason, "bad_frame");  // uid only
  EXPECT_EQ(Refused(DecodeFrames({})).reason, "bad_frame");
  // Engine-driven and unknown ids, a uid that is not an int, trailing bytes.
  EXPECT_EQ(Refused(DecodeFrames(Frames({"06", "0e", "80"}))).reason, "unsupported_op");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"07", "63"}))).reason, "unknown_op");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"a178", "15"}))).reason, "bad_frame");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"08", "1500"}))).reason, "bad_msgpack");
  // An array claiming 2^32-1 elements in five bytes.
  EXPECT_EQ(
      Refused(DecodeFrames(Frames({"09", "06", "ddffffffff", "cd1092", "90", "c400"}))).reason,
      "bad_msgpack");
}

TEST(LmcacheCodecTest, RefusesBadArguments) {
  // Wrong types.
  EXPECT_EQ(Refused(DecodeFrames(Frames({"01", "09", "01"}))).reason, "bad_argument");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"01", "14", "00"}))).reason, "bad_argument");
  // A transfer without a worker_id, a key without its tokens, num_kv_readers 0.
  EXPECT_EQ(Refused(DecodeFrames(Frames({"03", "06", Key(false), "cd1092", "90", "c400"}))).reason,
            "bad_argument");
  EXPECT_EQ(Refused(DecodeFrames(Frames({"04", "08", "81a5737461727400", "01"}))).reason,
            "bad_argument");
  std::string zero_readers = Hex(Key(false));
  zero_readers.back() = 0;  // num_kv_readers
  EXPECT_EQ(Refused(DecodeFrames({Hex("04"), Hex("08"), zero_readers, Hex("01")})).reason,
            "bad_argument");
  // A handle that is not ext 1, and an ext 1 holding a pickle (0x80 protocol byte).
  auto reg = RegisterFrames();
  reg[3] = Hex("91c40180");
  EXPECT_EQ(Refused(DecodeFrames(reg)).reason, "bad_argument");
  reg[3] = Hex("91c703018004ff");
  EXPECT_EQ(Refused(DecodeFrames(reg)).reason, "bad_msgpack");
  // A cpu_shm descriptor with a field LMCache does not define.
  reg[3] = Hex("91" + Ext1("86" + DescFields() + "a17800"));
  EXPECT_EQ(Refused(DecodeFrames(reg)).reason, "bad_argument");
}

TEST(LmcacheCodecTest, OtherWrapperTypesDecodeAsFarAsTheirType) {
  // {"type": "cuda", "version": 1, "metadata": {...}, "handle": []}: the front refuses it by name.
  auto reg = RegisterFrames();
  const std::string meta = DescFields().substr(DescFields().find("a86d65"));
  reg[3] = Hex("91" + Ext1("84a474797065a463756461a776657273696f6e01" + meta + "a668616e646c6590"));
  const auto d = Args<RegisterKvCache>(DecodeFrames(reg), Op::kRegisterKvCache);
  ASSERT_EQ(d.kv_cache.size(), 1u);
  EXPECT_EQ(d.kv_cache[0].type, "cuda");
  EXPECT_EQ(d.kv_cache[0].dtype, "bfloat16");
}

// Every truncation and many byte changes of the client's frames decode to a request or a
// refusal, never a crash (run under ASan in the sanitizer build). Not a fuzzer, a floor.
TEST(LmcacheCodecTest, MangledClientFramesNeverCrashTheDecoder) {
  const std::vector<std::vector<std::string>> sets = {
      RegisterFrames(),
      Frames({"03", "06", Key(true), "cd1092", "9196010203040506",
              "c40f737475625f6970635f68616e646c65"}),
      Frames({"04", "08", Key(false), "01"}),
  };
  size_t refused = 0, decoded = 0;
  for (const auto& frames : sets) {
    for (size_t part = 0; part < frames.size(); ++part) {
      const std::string& original = frames[part];
      for (size_t at = 0; at < original.size(); ++at) {
        auto mangled = frames;
        mangled[part] = original.substr(0, at);  // truncated
        std::holds_alternative<Refusal>(DecodeFrames(mangled)) ? ++refused : ++decoded;
        for (const char b : {'\x00', '\xc1', '\xdd', '\xff', '\x7f'}) {
          mangled[part] = original;
          mangled[part][at] = b;
          std::holds_alternative<Refusal>(DecodeFrames(mangled)) ? ++refused : ++decoded;
        }
      }
    }
  }
  EXPECT_GT(refused, 1000u);
  EXPECT_GT(decoded, 0u);  // some changes are still valid (a token id, a name's letter)
}

TEST(LmcacheCodecTest, RepliesEchoUidAndOpAndOmitNone) {
  const std::string uid = Hex("cd1092"), op = Hex("08");
  EXPECT_EQ(EncodeReply(uid, op, std::monostate{}), (std::vector<std::string>{uid, op}));
  EXPECT_EQ(EncodeReply(uid, op, int64_t{32}), (std::vector<std::string>{uid, op, Hex("20")}));
  EXPECT_EQ(EncodeReply(uid, op, true)[2], Hex("c3"));
  EXPECT_EQ(EncodeReply(uid, op, std::string("OK"))[2], Hex("a24f4b"));
  EXPECT_EQ(EncodeReply(uid, op, std::vector<std::string>{})[2], Hex("90"));
  EXPECT_EQ(EncodeReply(uid, op, TransferResult{"", true})[2], Hex("92c400c3"));
  EXPECT_EQ(EncodeReply(uid, op, TransferResult{"ab", false})[2], Hex("92c4026162c2"));
}

}  // namespace
}  // namespace kvtier::lmcache
