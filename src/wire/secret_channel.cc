// The secret channel's handshake messages, proofs, keys and record sealing (secret_channel.h).
#include "wire/secret_channel.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>

#include "common/endian.h"

namespace kvtier::wire {
namespace {

constexpr char kChannelMagic[4] = {'K', 'V', 'T', 'R'};
constexpr size_t kIvBytes = 12;

// HMAC-SHA256(secret, label || client nonce || server nonce [|| shared]).
std::array<uint8_t, 32> Mac(std::string_view secret, std::string_view label, const Nonce& client,
                            const Nonce& server, const std::array<uint8_t, 32>* shared = nullptr) {
  std::string input(label);
  input.append(reinterpret_cast<const char*>(client.data()), client.size());
  input.append(reinterpret_cast<const char*>(server.data()), server.size());
  if (shared != nullptr) input.append(reinterpret_cast<const char*>(shared->data()), 32);
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), out.data(), &len);
  return out;
}

}  // namespace

Nonce RandomNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    // OpenSSL's generator cannot fail once seeded from the kernel; never run on a fixed nonce.
    std::abort();
  }
  return n;
}

std::string EncodeHello(const Hello& h) {
  std::string out(kChannelMagic, sizeof(kChannelMagic));
  out.push_back(static_cast<char>(h.version));
  out.push_back(h.auth ? 1 : 0);
  out.append(2, '\0');
  out.append(reinterpret_cast<const char*>(h.nonce.data()), h.nonce.size());
  return out;
}

Result<Hello> DecodeHello(const void* data, size_t size) {
  if (size < kHelloBytes) return Status(Code::kProtocolError, "hello: too short");
  const auto* p = static_cast<const uint8_t*>(data);
  if (std::memcmp(p, kChannelMagic, sizeof(kChannelMagic)) != 0) {
    return Status(Code::kProtocolError, "not a kvtier rpc peer (its first bytes are no hello)");
  }
  Hello h;
  h.version = p[4];
  if (p[5] > 1) return Status(Code::kProtocolError, "hello: auth flag is neither 0 nor 1");
  h.auth = p[5] == 1;
  std::memcpy(h.nonce.data(), p + 8, h.nonce.size());
  return h;
}

HandshakeKeys DeriveHandshakeKeys(std::string_view secret, const Nonce& client,
                                  const Nonce& server, const std::array<uint8_t, 32>& shared) {
  HandshakeKeys k;
  k.client_proof = Mac(secret, "kvtier rpc client proof v1", client, server);
  k.server_proof = Mac(secret, "kvtier rpc server proof v1", client, server);
  k.client_to_server = Mac(secret, "kvtier rpc client-to-server key v1", client, server, &shared);
  k.server_to_client = Mac(secret, "kvtier rpc server-to-client key v1", client, server, &shared);
  return k;
}

Proof DataPlaneProof(std::string_view secret, const Nonce& client, const Nonce& server) {
  return Mac(secret, "kvtier data-plane client proof v1", client, server);
}

Result<EphemeralKey> EphemeralKey::Generate() {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519");
  if (key == nullptr) return Status(Code::kInternal, "cannot generate an X25519 key");
  EphemeralKey out(key);
  size_t len = out.public_key_.size();
  if (EVP_PKEY_get_raw_public_key(key, out.public_key_.data(), &len) != 1 ||
      len != out.public_key_.size()) {
    return Status(Code::kInternal, "cannot read an X25519 public key");
  }
  return out;
}

EphemeralKey::~EphemeralKey() { EVP_PKEY_free(key_); }

Result<std::array<uint8_t, 32>> EphemeralKey::Agree(const Nonce& peer) const {
  std::array<uint8_t, 32> shared{};
  EVP_PKEY* theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer.data(), peer.size());
  EVP_PKEY_CTX* ctx = theirs != nullptr ? EVP_PKEY_CTX_new(key_, nullptr) : nullptr;
  size_t len = shared.size();
  // OpenSSL refuses a peer key whose shared secret is all zeros (a low-order point).
  const bool ok = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 &&
                  EVP_PKEY_derive_set_peer(ctx, theirs) == 1 &&
                  EVP_PKEY_derive(ctx, shared.data(), &len) == 1 && len == shared.size();
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(theirs);
  if (!ok) return Status(Code::kPermissionDenied, "the peer's ephemeral key gives no shared secret");
  return shared;
}

bool SameProof(const Proof& a, const void* b) {
  return CRYPTO_memcmp(a.data(), b, a.size()) == 0;
}

RecordCipher::RecordCipher(const std::array<uint8_t, 32>& key)
    : ctx_(EVP_CIPHER_CTX_new()), key_(key) {}

RecordCipher::~RecordCipher() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(key_.data(), key_.size());
}

void RecordCipher::Nonce12(uint8_t* iv) const {
  std::memset(iv, 0, kIvBytes);
  StoreLE<uint64_t>(iv + 4, counter_);
}

Status RecordCipher::Seal(std::string& out, size_t from, std::string_view aad) {
  if (ctx_ == nullptr) return Status(Code::kInternal, "seal: no cipher context");
  uint8_t iv[kIvBytes];
  Nonce12(iv);
  // The key is set once; each record only sets its IV.
  const unsigned char* key = initialised_ ? nullptr : key_.data();
  int len = 0;
  const size_t n = out.size() - from;
  auto* p = reinterpret_cast<unsigned char*>(out.data() + from);
  bool ok = EVP_EncryptInit_ex(ctx_, initialised_ ? nullptr : EVP_aes_256_gcm(), nullptr, key,
                               iv) == 1 &&
            EVP_EncryptUpdate(ctx_, nullptr, &len,
                              reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) == 1 &&
            EVP_EncryptUpdate(ctx_, p, &len, p, static_cast<int>(n)) == 1 &&
            EVP_EncryptFinal_ex(ctx_, p + len, &len) == 1;
  if (!ok) return Status(Code::kInternal, "seal: AES-GCM failed");
  initialised_ = true;
  out.resize(out.size() + kSealOverheadBytes);
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kSealOverheadBytes,
                          out.data() + from + n) != 1) {
    return Status(Code::kInternal, "seal: no GCM tag");
  }
  ++counter_;
  return Status::Ok();
}

Result<size_t> RecordCipher::Open(uint8_t* data, size_t size, std::string_view aad) {
  if (ctx_ == nullptr) return Status(Code::kInternal, "open: no cipher context");
  if (size < kSealOverheadBytes) {
    return Status(Code::kPermissionDenied, "sealed record shorter than its tag");
  }
  const size_t n = size - kSealOverheadBytes;
  uint8_t iv[kIvBytes];
  Nonce12(iv);
  const unsigned char* key = initialised_ ? nullptr : key_.data();
  int len = 0;
  bool ok = EVP_DecryptInit_ex(ctx_, initialised_ ? nullptr : EVP_aes_256_gcm(), nullptr, key,
                               iv) == 1 &&
            EVP_DecryptUpdate(ctx_, nullptr, &len,
                              reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) == 1 &&
            EVP_DecryptUpdate(ctx_, data, &len, data, static_cast<int>(n)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kSealOverheadBytes, data + n) == 1;
  initialised_ = true;
  if (!ok || EVP_DecryptFinal_ex(ctx_, data + len, &len) != 1) {
    return Status(Code::kPermissionDenied,
                  "a record failed authentication (altered, replayed, or sealed with another key)");
  }
  ++counter_;
  return n;
}

}  // namespace kvtier::wire
