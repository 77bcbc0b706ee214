// RPC records: encode and read back in the clear and sealed, byte by byte and in one piece, and
// the reader's refusals (over the limit, shorter than the envelope, failed authentication).
#include "store/transport/rpc_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/endian.h"

namespace kvtier::store::rpc {
namespace {

void Feed(RecordReader& r, const std::string& bytes) {
  std::memcpy(r.Space(bytes.size()), bytes.data(), bytes.size());
  r.Filled(bytes.size());
}

TEST(RpcRecords, ReadBackWholeOrByteByByteInTheClearAndSealed) {
  const wire::HandshakeKeys k =
      wire::DeriveHandshakeKeys("s", wire::RandomNonce(), wire::RandomNonce());
  for (const bool sealed : {false, true}) {
    SCOPED_TRACE(sealed ? "sealed" : "clear");
    wire::RecordCipher seal(k.client_to_server);
    std::string stream;
    const std::vector<std::string> bodies = {"", "one", std::string(200'000, 'x')};
    for (size_t i = 0; i < bodies.size(); ++i) {
      ASSERT_TRUE(AppendRecord(stream, 100 + i, 7, bodies[i], sealed ? &seal : nullptr).ok());
    }
    for (const bool byte_by_byte : {false, true}) {
      RecordReader reader(1 << 20, sealed ? std::make_unique<wire::RecordCipher>(
                                                k.client_to_server)
                                          : nullptr);
      std::vector<std::string> got;
      auto drain = [&] {
        while (true) {
          auto m = reader.Next();
          ASSERT_TRUE(m.ok()) << m.status().ToString();
          if (!m->has_value()) return;
          EXPECT_EQ((*m)->id, 100 + got.size());
          EXPECT_EQ((*m)->op, 7u);
          got.emplace_back((*m)->body);
        }
      };
      if (byte_by_byte) {
        for (char c : stream) {
          Feed(reader, std::string(1, c));
          drain();
        }
      } else {
        Feed(reader, stream);
        drain();
      }
      EXPECT_EQ(got, bodies);
      EXPECT_EQ(reader.pending(), 0u);
    }
  }
}

TEST(RpcRecords, TheReaderRefusesWhatItCannotTrust) {
  {
    RecordReader reader(1000, nullptr);
    std::string head;
    AppendLE<uint32_t>(head, 1001);
    Feed(reader, head);
    EXPECT_EQ(reader.Next().status().code(), Code::kTooLarge);
  }
  {
    RecordReader reader(1000, nullptr);
    std::string shorty;
    AppendLE<uint32_t>(shorty, 11);
    Feed(reader, shorty + std::string(11, 'a'));
    EXPECT_EQ(reader.Next().status().code(), Code::kProtocolError);
  }
  {
    const wire::HandshakeKeys k =
        wire::DeriveHandshakeKeys("s", wire::RandomNonce(), wire::RandomNonce());
    std::string clear;
    ASSERT_TRUE(AppendRecord(clear, 1, 2, "body", nullptr).ok());
    RecordReader reader(1000, std::make_unique<wire::RecordCipher>(k.client_to_server));
    Feed(reader, clear);  // a record in the clear where a sealed one is due
    EXPECT_EQ(reader.Next().status().code(), Code::kPermissionDenied);
  }
}

}  // namespace
}  // namespace kvtier::store::rpc
