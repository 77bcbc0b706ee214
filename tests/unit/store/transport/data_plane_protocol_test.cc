// The data plane's fixed headers: round trips, and every way a header can be rejected.
#include "store/transport/data_plane_protocol.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <limits>

#include "store/transport/tcp_io.h"

namespace kvtier::store::dp {
namespace {

using Raw = std::array<uint8_t, kRequestHeaderBytes>;

Raw Encode(Op op, uint64_t id, uint64_t offset, uint64_t length, uint64_t segment_id = 9,
           uint64_t term = 0) {
  Raw raw{};
  EncodeRequestHeader({op, id, segment_id, offset, length, term}, raw);
  return raw;
}

TEST(DataPlaneProtocol, RequestRoundTripIsLittleEndian) {
  static_assert(kRequestHeaderBytes == 48 && kVersion == 4);
  Raw raw = Encode(Op::kWrite, 0x0102030405060708ull, 77, 4096, 0x1112131415161718ull,
                   0x2122232425262728ull);
  EXPECT_EQ(raw[0], 'K');
  EXPECT_EQ(raw[1], 'V');
  EXPECT_EQ(raw[2], 'D');
  EXPECT_EQ(raw[3], 'Q');
  EXPECT_EQ(raw[4], 4);
  EXPECT_EQ(raw[5], static_cast<uint8_t>(Op::kWrite));
  EXPECT_EQ(raw[8], 0x08);  // request id, low byte first
  EXPECT_EQ(raw[15], 0x01);
  EXPECT_EQ(raw[16], 0x18);  // segment id
  EXPECT_EQ(raw[23], 0x11);
  EXPECT_EQ(raw[24], 77);  // offset
  EXPECT_EQ(raw[33], 0x10);  // length 4096 = 0x1000
  EXPECT_EQ(raw[40], 0x28);  // the master term
  EXPECT_EQ(raw[47], 0x21);
  auto h = DecodeRequestHeader(raw);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->op, Op::kWrite);
  EXPECT_EQ(h->request_id, 0x0102030405060708ull);
  EXPECT_EQ(h->segment_id, 0x1112131415161718ull);
  EXPECT_EQ(h->offset, 77u);
  EXPECT_EQ(h->length, 4096u);
  EXPECT_EQ(h->term, 0x2122232425262728ull);
  // AUTH and PROOF carry the field too (0 by convention); the decoder does not judge it.
  raw = Encode(Op::kAuth, 1, 0, 5, 0);
  EXPECT_EQ(DecodeRequestHeader(raw)->segment_id, 0u);
  raw = Encode(Op::kProof, 2, 0, kProofPayloadBytes, 0);
  EXPECT_EQ(DecodeRequestHeader(raw)->op, Op::kProof);
}

TEST(DataPlaneProtocol, EarlierVersionsAreRefusedFromTheirPrefix) {
  // Version 1 sent 32-byte headers without a segment id, version 2 the secret itself in AUTH,
  // version 3 40-byte headers without the master term; the first 8 bytes suffice to refuse each.
  for (uint8_t version : {1, 2, 3}) {
    Raw raw = Encode(Op::kRead, 1, 0, 1);
    raw[4] = version;
    const Status prefix = CheckRequestPrefix(std::span(raw).first<kRequestPrefixBytes>());
    EXPECT_EQ(prefix.code(), Code::kVersionMismatch);
    EXPECT_NE(prefix.message().find(fmt::format("data-plane version {} not supported", version)),
              std::string::npos)
        << prefix.message();
    EXPECT_NE(prefix.message().find("speaks 4"), std::string::npos) << prefix.message();
    EXPECT_EQ(DecodeRequestHeader(raw).status().code(), Code::kVersionMismatch);
  }
  const Raw v4 = Encode(Op::kRead, 1, 0, 1);
  EXPECT_TRUE(CheckRequestPrefix(std::span(v4).first<kRequestPrefixBytes>()).ok());
}

TEST(DataPlaneProtocol, RejectsBadMagicVersionOpAndFlags) {
  Raw raw = Encode(Op::kRead, 1, 0, 1);
  raw[0] = 'X';
  EXPECT_EQ(DecodeRequestHeader(raw).status().code(), Code::kProtocolError);
  EXPECT_EQ(CheckRequestPrefix(std::span(raw).first<kRequestPrefixBytes>()).code(),
            Code::kProtocolError);
  raw = Encode(Op::kRead, 1, 0, 1);
  raw[4] = 5;
  EXPECT_EQ(DecodeRequestHeader(raw).status().code(), Code::kVersionMismatch);
  for (uint8_t op : {0, 7, 255}) {
    raw = Encode(Op::kRead, 1, 0, 1);
    raw[5] = op;
    auto h = DecodeRequestHeader(raw);
    EXPECT_EQ(h.status().code(), Code::kUnknownRequest) << int(op);
    EXPECT_NE(h.status().message().find("unknown data-plane op"), std::string::npos);
  }
  raw = Encode(Op::kRead, 1, 0, 1);
  raw[7] = 1;
  EXPECT_EQ(DecodeRequestHeader(raw).status().code(), Code::kProtocolError);
}

TEST(DataPlaneProtocol, ValidateBoundsWithoutOverflow) {
  const uint64_t kSeg = 1 << 20;
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(ValidateRequest({Op::kRead, 1, 9, 0, kSeg}, kSeg).ok());
  EXPECT_TRUE(ValidateRequest({Op::kWrite, 1, 9, kSeg - 1, 1}, kSeg).ok());
  EXPECT_TRUE(ValidateRequest({Op::kWrite, 1, 9, kSeg, 0}, kSeg).ok());
  EXPECT_EQ(ValidateRequest({Op::kWrite, 1, 9, kSeg, 1}, kSeg).code(), Code::kOutOfRange);
  EXPECT_EQ(ValidateRequest({Op::kRead, 1, 9, kSeg - 1, 2}, kSeg).code(), Code::kOutOfRange);
  // offset + length wraps around to a small number: still outside.
  EXPECT_EQ(ValidateRequest({Op::kRead, 1, 9, kMax - 10, 4096}, kSeg).code(), Code::kOutOfRange);
  EXPECT_EQ(ValidateRequest({Op::kRead, 1, 9, 16, kMax - 8}, kSeg).code(), Code::kTooLarge);
  EXPECT_EQ(ValidateRequest({Op::kWrite, 1, 9, 0, kMaxOpBytes + 1}, kMax).code(), Code::kTooLarge);
  EXPECT_TRUE(ValidateRequest({Op::kWrite, 1, 9, 0, kMaxOpBytes}, kMax).ok());
  EXPECT_TRUE(ValidateRequest({Op::kAuth, 1, 9, 0, 0}, 0).ok());
  EXPECT_EQ(ValidateRequest({Op::kAuth, 1, 9, 0, 1}, 0).code(), Code::kInvalidArgument);
  EXPECT_TRUE(ValidateRequest({Op::kProof, 1, 9, 0, kProofPayloadBytes}, 0).ok());
  EXPECT_EQ(ValidateRequest({Op::kProof, 1, 9, 0, kProofPayloadBytes - 1}, 0).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ValidateRequest({Op::kProof, 1, 9, 0, kMax}, 0).code(), Code::kInvalidArgument);
  EXPECT_TRUE(RangeInside(0, 0, 0));
  EXPECT_FALSE(RangeInside(1, 0, 0));
  EXPECT_FALSE(RangeInside(kMax, kMax, kMax - 1));
}

TEST(DataPlaneProtocol, ReplyRoundTripAndLimits) {
  std::array<uint8_t, kReplyHeaderBytes> raw{};
  EncodeReplyHeader({-600, 42, 17}, raw);
  auto h = DecodeReplyHeader(raw);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, -600);
  EXPECT_EQ(h->request_id, 42u);
  EXPECT_EQ(h->length, 17u);
  EncodeReplyHeader({-600, 42, kMaxErrorMessageBytes + 1}, raw);
  EXPECT_FALSE(DecodeReplyHeader(raw).ok());
  EncodeReplyHeader({0, 42, kMaxOpBytes + 1}, raw);
  EXPECT_FALSE(DecodeReplyHeader(raw).ok());
  EncodeReplyHeader({0, 42, 8}, raw);
  raw[1] ^= 0xff;
  EXPECT_EQ(DecodeReplyHeader(raw).status().code(), Code::kProtocolError);
}

TEST(DataPlaneProtocol, EndpointParsing) {
  auto ep = tcp::ParseEndpoint("127.0.0.1:50052");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 50052);
  ep = tcp::ParseEndpoint("[::1]:9");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->host, "::1");
  for (const char* bad : {"", "host", ":1", "h:", "h:0", "h:65536", "h:12x", "h:-1"}) {
    EXPECT_FALSE(tcp::ParseEndpoint(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kvtier::store::dp
