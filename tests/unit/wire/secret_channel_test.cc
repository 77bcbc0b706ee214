// The secret channel's pieces without sockets: hello encoding, proofs and keys that depend on the
// secret, both nonces and the ephemeral keys' agreement, and AES-GCM records that refuse
// tampering, replay and the wrong key.
#include "wire/secret_channel.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier::wire {
namespace {

TEST(SecretChannel, HelloRoundTripsAndForeignBytesAreRefused) {
  Hello h;
  h.auth = true;
  h.nonce = RandomNonce();
  const std::string bytes = EncodeHello(h);
  ASSERT_EQ(bytes.size(), kHelloBytes);
  auto back = DecodeHello(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->auth);
  EXPECT_EQ(back->version, kSecretChannelVersion);
  EXPECT_EQ(back->nonce, h.nonce);
  const std::string zmtp = std::string("\xff") + std::string(kHelloBytes - 1, '\0');
  auto foreign = DecodeHello(zmtp.data(), zmtp.size());
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a kvtier rpc peer"), std::string::npos);
  std::string bad_flag = bytes;
  bad_flag[5] = 7;
  EXPECT_FALSE(DecodeHello(bad_flag.data(), bad_flag.size()).ok());
  EXPECT_FALSE(DecodeHello(bytes.data(), kHelloBytes - 1).ok());
}

TEST(SecretChannel, ProofsAndKeysDependOnTheSecretAndBothNonces) {
  const Nonce a = RandomNonce(), b = RandomNonce();
  EXPECT_NE(a, b);
  const HandshakeKeys k = DeriveHandshakeKeys("secret", a, b);
  EXPECT_TRUE(SameProof(k.client_proof, DeriveHandshakeKeys("secret", a, b).client_proof.data()));
  EXPECT_FALSE(SameProof(k.client_proof, DeriveHandshakeKeys("secreT", a, b).client_proof.data()));
  EXPECT_FALSE(SameProof(k.client_proof, DeriveHandshakeKeys("secret", b, a).client_proof.data()));
  EXPECT_FALSE(SameProof(k.client_proof, k.server_proof.data()));
  EXPECT_NE(k.client_to_server, k.server_to_client);
}

TEST(SecretChannel, EphemeralKeysAgreeAndTheSessionKeysDependOnThem) {
  auto a = EphemeralKey::Generate();
  auto b = EphemeralKey::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->public_key(), b->public_key());
  auto ab = a->Agree(b->public_key());
  auto ba = b->Agree(a->public_key());
  ASSERT_TRUE(ab.ok() && ba.ok()) << ab.status().ToString();
  EXPECT_EQ(*ab, *ba);
  const Nonce& cn = a->public_key();
  const Nonce& sn = b->public_key();
  const HandshakeKeys with = DeriveHandshakeKeys("secret", cn, sn, *ab);
  const HandshakeKeys without = DeriveHandshakeKeys("secret", cn, sn);
  // The proofs need only the secret; the record keys also need the ephemeral keys.
  EXPECT_TRUE(SameProof(with.client_proof, without.client_proof.data()));
  EXPECT_NE(with.client_to_server, without.client_to_server);
  EXPECT_NE(with.server_to_client, without.server_to_client);
  // A low-order point (all zeros) gives no shared secret and is refused.
  EXPECT_EQ(a->Agree(Nonce{}).status().code(), Code::kPermissionDenied);
}

TEST(SecretChannel, RecordsOpenOnceInOrderAndOnlyUnaltered) {
  const HandshakeKeys k = DeriveHandshakeKeys("secret", RandomNonce(), RandomNonce());
  RecordCipher sealer(k.client_to_server);
  std::string first = "head" + std::string("first record");
  ASSERT_TRUE(sealer.Seal(first, 4, std::string_view(first.data(), 4)).ok());
  EXPECT_EQ(first.size(), 4 + 12 + kSealOverheadBytes);
  EXPECT_EQ(first.find("first record"), std::string::npos);  // encrypted
  std::string second = "head" + std::string("second");
  ASSERT_TRUE(sealer.Seal(second, 4, std::string_view(second.data(), 4)).ok());

  auto open = [](RecordCipher& c, std::string record) -> Result<std::string> {
    auto n = c.Open(reinterpret_cast<uint8_t*>(record.data() + 4), record.size() - 4,
                    std::string_view(record.data(), 4));
    if (!n.ok()) return n.status();
    return record.substr(4, *n);
  };
  {
    RecordCipher opener(k.client_to_server);
    auto one = open(opener, first);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    EXPECT_EQ(*one, "first record");
    EXPECT_FALSE(open(opener, first).ok());  // replayed
  }
  {
    RecordCipher opener(k.client_to_server);
    EXPECT_FALSE(open(opener, second).ok());  // out of order
  }
  {
    RecordCipher opener(k.client_to_server);
    std::string altered = first;
    altered[6] ^= 1;
    EXPECT_EQ(open(opener, altered).status().code(), Code::kPermissionDenied);
  }
  {
    RecordCipher opener(k.client_to_server);
    std::string other_head = first;
    other_head[0] = 'H';  // the length prefix is authenticated too
    EXPECT_FALSE(open(opener, other_head).ok());
  }
  {
    RecordCipher wrong_key(k.server_to_client);
    EXPECT_FALSE(open(wrong_key, first).ok());
  }
}

}  // namespace
}  // namespace kvtier::wire
