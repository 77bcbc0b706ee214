// Authentication and encryption for kvtier's plain-socket RPC (the store master's port, docs/
// security.md), keyed by the shared secret of `--auth-token-file`: what CURVE gives a ZMQ port,
// without ZMQ's I/O threads.
//
// The handshake, right after connect, fixed sizes, in the clear:
//   client -> server  hello   "KVTR" | version u8 | auth u8 (1: has a secret) | 0 u16 | nonce[32]
//   server -> client  hello   the same layout with the server's nonce
//   client -> server  proof[32]                 (only when both sides have a secret)
//   server -> client  verdict u8, proof[32]     (only then: 0 admitted with the server's proof,
//                                                1 refused with zeros)
// Each proof is HMAC-SHA256 over both nonces, keyed by the secret, with a label per side, so each
// side proves it holds the secret (the client also learns it reached a real master), the secret
// never crosses the wire, and a recorded handshake is worth nothing on the next connection (fresh
// nonces). The client proves first: a server hands its proof (something to guess the secret
// against offline) only to clients that proved theirs. The session keys (one per direction) are HMACs of the same nonces under other labels.
// With a secret, each side's nonce is a fresh X25519 public key (EphemeralKey), and the session
// keys also cover the two keys' shared secret: someone who records the traffic and later learns
// the secret still cannot decrypt it (forward secrecy, as CURVE's short-term keys give).
// Afterwards every record is sealed with AES-256-GCM (RecordCipher): encrypted, authenticated,
// numbered by a per-direction counter, so a record cannot be altered, replayed, dropped or
// reordered unnoticed.
// Thread-safety: a RecordCipher belongs to one connection's reader or writer.
#pragma once

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier::wire {

inline constexpr uint8_t kSecretChannelVersion = 1;
inline constexpr size_t kHelloBytes = 40;          // magic, version, auth, reserved, nonce
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kVerdictBytes = 1 + kProofBytes;
inline constexpr size_t kSealOverheadBytes = 16;   // the GCM tag at the end of each record

using Nonce = std::array<uint8_t, 32>;
using Proof = std::array<uint8_t, kProofBytes>;

struct Hello {
  uint8_t version = kSecretChannelVersion;
  bool auth = false;
  Nonce nonce{};
};

Nonce RandomNonce();
std::string EncodeHello(const Hello& h);
// kProtocolError naming what is wrong ("not a kvtier rpc peer" when the magic differs). `data`
// must hold kHelloBytes.
Result<Hello> DecodeHello(const void* data, size_t size);

// A one-connection X25519 key pair; its public key is the hello's nonce.
class EphemeralKey {
 public:
  static Result<EphemeralKey> Generate();
  EphemeralKey(EphemeralKey&& o) noexcept : key_(o.key_), public_key_(o.public_key_) {
    o.key_ = nullptr;
  }
  EphemeralKey(const EphemeralKey&) = delete;
  EphemeralKey& operator=(const EphemeralKey&) = delete;
  EphemeralKey& operator=(EphemeralKey&&) = delete;
  ~EphemeralKey();

  const Nonce& public_key() const { return public_key_; }
  // The shared secret with the peer's public key; kPermissionDenied for a key that gives none
  // (a low-order point: a peer trying to force a known result).
  Result<std::array<uint8_t, 32>> Agree(const Nonce& peer) const;

 private:
  explicit EphemeralKey(EVP_PKEY* key) : key_(key) {}
  EVP_PKEY* key_;
  Nonce public_key_{};
};

// The proofs and keys of one connection: both nonces, the secret, and the ephemeral keys' shared
// secret (zeros: none).
struct HandshakeKeys {
  Proof client_proof{};
  Proof server_proof{};
  std::array<uint8_t, 32> client_to_server{};
  std::array<uint8_t, 32> server_to_client{};
};
HandshakeKeys DeriveHandshakeKeys(std::string_view secret, const Nonce& client,
                                  const Nonce& server,
                                  const std::array<uint8_t, 32>& shared = {});
// The store data plane's proof that a client holds the secret (store/transport/
// data_plane_protocol.h): the same MAC over both nonces under a label of its own, so a proof made
// for one listener is worth nothing at the other.
Proof DataPlaneProof(std::string_view secret, const Nonce& client, const Nonce& server);
// Constant time.
bool SameProof(const Proof& a, const void* b);

// AES-256-GCM for one direction of one connection. Seal/Open take the record's length prefix as
// associated data and number records by a counter, so both sides must seal and open the same
// sequence.
class RecordCipher {
 public:
  explicit RecordCipher(const std::array<uint8_t, 32>& key);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Encrypts `out[from, end)` in place and appends the tag; `aad` is the record's header.
  Status Seal(std::string& out, size_t from, std::string_view aad);
  // Decrypts `data` (ciphertext then tag) in place; returns the plaintext's size. A wrong tag is
  // kPermissionDenied: the record was altered, replayed, reordered, or sealed with another key.
  Result<size_t> Open(uint8_t* data, size_t size, std::string_view aad);

 private:
  void Nonce12(uint8_t* iv) const;

  EVP_CIPHER_CTX* ctx_;
  bool initialised_ = false;
  std::array<uint8_t, 32> key_;
  uint64_t counter_ = 0;
};

}  // namespace kvtier::wire
