#include "common/hashing.h"

#include <openssl/evp.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "common/endian.h"
#include "common/logging.h"

namespace kvtier {

namespace {

// The bytes every chain link hashes: prev (16 bytes) then the tokens as little-endian uint32.
// A thread-local buffer avoids an allocation per chunk.
std::span<const uint8_t> LinkInput(const ChunkHash& prev, std::span<const uint32_t> tokens) {
  thread_local std::vector<uint8_t> buf;
  buf.resize(prev.size() + tokens.size() * sizeof(uint32_t));
  std::memcpy(buf.data(), prev.data(), prev.size());
  uint8_t* p = buf.data() + prev.size();
  if constexpr (std::endian::native == std::endian::little) {
    if (!tokens.empty()) std::memcpy(p, tokens.data(), tokens.size_bytes());
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) StoreLE(p + 4 * i, tokens[i]);
  }
  return buf;
}

ChunkHash Xxh3(std::span<const uint8_t> bytes) {
  XXH128_canonical_t canon;
  // The canonical (big-endian) form makes the 16 bytes independent of host byte order.
  XXH128_canonicalFromHash(&canon, XXH3_128bits(bytes.data(), bytes.size()));
  ChunkHash h;
  static_assert(sizeof(canon.digest) == sizeof(ChunkHash));
  std::memcpy(h.data(), canon.digest, h.size());
  return h;
}

ChunkHash Sha256(std::span<const uint8_t> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate; a made-up hash would alias other
  // prefixes' cache entries, so stop instead.
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1 ||
      len < sizeof(ChunkHash)) {
    KVT_LOG_ERROR("sha256 via OpenSSL EVP failed");
    std::abort();
  }
  ChunkHash h;
  std::memcpy(h.data(), digest, h.size());  // truncated to the first 16 bytes
  return h;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<HashAlgo> ParseHashAlgo(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "xxh3") return HashAlgo::kXxh3;
  if (lower == "sha256") return HashAlgo::kSha256;
  return std::nullopt;
}

const char* HashAlgoName(HashAlgo algo) {
  switch (algo) {
    case HashAlgo::kXxh3:
      return "xxh3";
    case HashAlgo::kSha256:
      return "sha256";
  }
  return "unknown";
}

ChunkHash InitialHash() {
  // h_{-1} = canonical xxh3-128 of the ASCII bytes "kvtier-chain-v1" (no terminator), for both
  // algorithms. Every stored key derives from it: it must never change (a test pins its hex).
  static const ChunkHash kInitial = [] {
    static constexpr char kSeed[] = "kvtier-chain-v1";
    return Xxh3({reinterpret_cast<const uint8_t*>(kSeed), sizeof(kSeed) - 1});
  }();
  return kInitial;
}

ChunkHash HashChunk(HashAlgo algo, const ChunkHash& prev, std::span<const uint32_t> tokens) {
  std::span<const uint8_t> input = LinkInput(prev, tokens);
  return algo == HashAlgo::kSha256 ? Sha256(input) : Xxh3(input);
}

void HashChunks(HashAlgo algo, std::span<const uint32_t> tokens, size_t chunk_size,
                std::vector<ChunkHash>& out) {
  if (chunk_size == 0) return;
  const size_t full = tokens.size() / chunk_size;
  out.reserve(out.size() + full);
  ChunkHash prev = InitialHash();
  for (size_t i = 0; i < full; ++i) {
    prev = HashChunk(algo, prev, tokens.subspan(i * chunk_size, chunk_size));
    out.push_back(prev);
  }
}

std::string HashToHex(const ChunkHash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(h.size() * 2, '0');
  for (size_t i = 0; i < h.size(); ++i) {
    s[2 * i] = kDigits[h[i] >> 4];
    s[2 * i + 1] = kDigits[h[i] & 0xf];
  }
  return s;
}

std::optional<ChunkHash> HashFromHex(std::string_view hex) {
  ChunkHash h;
  if (hex.size() != h.size() * 2) return std::nullopt;
  for (size_t i = 0; i < h.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    h[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return h;
}

}  // namespace kvtier
