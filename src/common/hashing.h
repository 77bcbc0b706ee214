// Chained chunk hashing: h_i = H(h_{i-1} || tokens of chunk i as little-endian uint32).
// One 16-byte key names a whole prefix, so only the leading run of hits counts.
// xxh3-128 is the default; sha256 (truncated to 16 bytes) is selectable.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier {

using ChunkHash = std::array<uint8_t, 16>;

enum class HashAlgo { kXxh3, kSha256 };

std::optional<HashAlgo> ParseHashAlgo(std::string_view name);  // "xxh3" | "sha256" (any case)
const char* HashAlgoName(HashAlgo algo);

// The seed value h_{-1}: a fixed constant so every process and restart agrees (the same for both
// algorithms).
ChunkHash InitialHash();

// One link of the chain.
ChunkHash HashChunk(HashAlgo algo, const ChunkHash& prev, std::span<const uint32_t> tokens);

// Hashes of every *full* chunk of `tokens`, chained from InitialHash() at the start of `tokens`;
// a trailing partial chunk is not hashed. Appends to `out`. chunk_size == 0 appends nothing.
void HashChunks(HashAlgo algo, std::span<const uint32_t> tokens, size_t chunk_size,
                std::vector<ChunkHash>& out);

std::string HashToHex(const ChunkHash& h);  // 32 lowercase hex digits
// Accepts exactly 32 hex digits (either case); anything else is nullopt.
std::optional<ChunkHash> HashFromHex(std::string_view hex);

}  // namespace kvtier
