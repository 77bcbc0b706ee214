#include "wire/frames.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <msgpack.hpp>
#include <string>

#include "unit/wire/address_space_probe.h"
#include "wire/protocol.h"

namespace kvtier::wire {
namespace {

TEST(FramesTest, UintFrameRoundTrip) {
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{255}, uint64_t{65536},
                     uint64_t{1} << 32, UINT64_MAX}) {
    const std::string f = EncodeUintFrame(v);
    EXPECT_GE(f.size(), 1u);
    EXPECT_LE(f.size(), 9u);
    auto d = DecodeUintFrame(f.data(), f.size());
    ASSERT_TRUE(d.ok()) << v << ": " << d.status().ToString();
    EXPECT_EQ(*d, v);
  }
  // Smallest encodings: positive fixint is one byte, uint64 is nine.
  EXPECT_EQ(EncodeUintFrame(127).size(), 1u);
  EXPECT_EQ(EncodeUintFrame(128).size(), 2u);
  EXPECT_EQ(EncodeUintFrame(UINT64_MAX).size(), 9u);
}

TEST(FramesTest, AcceptsNonMinimalUintEncodings) {
  // uint64 0x00..05: a peer may always use the widest form.
  const std::string wide("\xcf\0\0\0\0\0\0\0\x05", 9);
  auto d = DecodeUintFrame(wide.data(), wide.size());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, 5u);
}

TEST(FramesTest, RejectsMalformedFrames) {
  const std::string cases[] = {
      std::string(),                           // empty
      std::string(10, '\x01'),                 // > 9 bytes
      std::string("\xa1\x61", 2),              // a string
      std::string("\xc0", 1),                  // nil
      std::string("\xc3", 1),                  // true
      std::string("\xff", 1),                  // negative fixint -1
      std::string("\xd0\x80", 2),              // int8 -128
      std::string("\xcb\0\0\0\0\0\0\0\0", 9),  // float64 0.0
      std::string("\x01\x02", 2),              // trailing byte
      std::string("\xcd\x01", 2),              // truncated uint16
      std::string("\xcf\0\0\0", 4),            // truncated uint64
      std::string("\x91\x01", 2),              // array [1]
      std::string("\xc1", 1),                  // reserved byte
  };
  for (const auto& c : cases) {
    auto d = DecodeUintFrame(c.data(), c.size());
    ASSERT_FALSE(d.ok()) << "accepted " << c.size() << " bytes";
    EXPECT_EQ(d.status().code(), Code::kProtocolError);
  }
}

TEST(FramesTest, NegativeIntegersFromMsgpackAreRejected) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, int64_t{-5});
  auto d = DecodeUintFrame(buf.data(), buf.size());
  EXPECT_FALSE(d.ok());
}

// BUG (src/wire/frames.cc): DecodeUintFrame calls msgpack::unpack with the default limits, so a
// 5-byte frame whose header claims a 2^32-1 element array or map makes the parser allocate
// tens of GiB up front (found by tests/fuzz/body_fuzzer; an ASan build of the server aborts).
// The server decodes these frames from any TCP peer before anything else (rpc_front.cc).
TEST(FramesTest, ContainerHeadersDoNotAllocate) {
  for (const std::string& frame :
       {std::string("\xdd\xff\xff\xff\xff", 5), std::string("\xdf\xff\xff\xff\xff", 5),
        std::string("\xdd\x10\x00\x00\x00\xdd\x10\x00\x00", 9)}) {
    const bool fits = test_util::FitsInHeadroom(
        [&] {
          auto v = DecodeUintFrame(frame.data(), frame.size());
          return !v.ok() && !test_util::MentionsBadAlloc(v.status().message());
        },
        64 << 20);
    EXPECT_TRUE(fits) << "a " << frame.size() << "-byte frame needed more than 64 MiB";
  }
}

TEST(ProtocolTest, RequestTypeNames) {
  EXPECT_STREQ(RequestTypeName(static_cast<uint32_t>(RequestType::kStore)), "STORE");
  EXPECT_STREQ(RequestTypeName(kMaxRequestType), "EVICT");
  EXPECT_STREQ(RequestTypeName(0), "UNKNOWN");
  EXPECT_STREQ(RequestTypeName(kMaxRequestType + 1), "UNKNOWN");
  for (uint32_t t = 1; t <= kMaxRequestType; ++t) EXPECT_STRNE(RequestTypeName(t), "UNKNOWN");
  EXPECT_EQ(UdsNameForPort(5555), "kvtier-server-5555");
}

}  // namespace
}  // namespace kvtier::wire
