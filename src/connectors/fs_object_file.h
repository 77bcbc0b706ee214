// The on-disk format of the `fs` connector: one file per key, and where that file lives.
//
// File layout (all integers little-endian):
//
//   offset  size  field
//        0     4  magic            "KVFS" (0x4B 0x56 0x46 0x53)
//        4     2  version          1
//        6     2  header_bytes     64: the bytes covered by header_hash (for later versions)
//        8     4  payload_offset   4096: where the payload starts
//       12     4  flags            0 (reserved; any other value is rejected)
//       16     8  payload_length   bytes of payload
//       24     8  payload_hash     XXH3-64 of the payload
//       32     8  key_hash         XXH3-64 of the key (a file renamed to another key's name is
//                                  detected)
//       40    16  reserved         zero
//       56     8  header_hash      XXH3-64 of bytes [0, 56)
//       64  4032  padding          zero, not checked
//     4096     n  payload          payload_length bytes; the file is exactly 4096 + n bytes
//
// The payload starts on a 4096-byte boundary so that O_DIRECT can move header and payload in one
// aligned preadv/pwritev, and buffered reads can land the payload straight in the caller's buffer.
//
// Where a file lives: <path>/<shard>/<name>. <shard> is `shard_depth` levels of two lowercase hex
// digits taken from the key hash ("3f/a0"). <name> is the key with every byte outside
// [A-Za-z0-9@._-], every '%', and a leading '.' written as %XX: a name never contains '/' or NUL
// and never starts with '.', so no key can name a path outside its shard directory, and the
// mapping is one-to-one. Model names carry '/' (org/model), which is why keys are escaped rather
// than rejected. Temporary files start with ".tmp-", a prefix no object name can have.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

inline constexpr size_t kFsHeaderBytes = 64;      // meaningful header bytes
inline constexpr size_t kFsPayloadOffset = 4096;  // the header, padded to one aligned page
inline constexpr uint16_t kFsFormatVersion = 1;
inline constexpr size_t kFsMaxNameBytes = 200;  // escaped name; NAME_MAX is 255 on Linux
inline constexpr uint32_t kFsMaxShardDepth = 3;
inline constexpr std::string_view kFsTempPrefix = ".tmp-";

struct FsHeader {
  uint64_t payload_length = 0;
  uint64_t payload_hash = 0;
  uint64_t key_hash = 0;
  bool operator==(const FsHeader&) const = default;
};

uint64_t FsHash(std::span<const uint8_t> bytes);
uint64_t FsKeyHash(std::string_view key);

// Writes the 64 header bytes (magic, version, ..., header_hash).
std::array<uint8_t, kFsHeaderBytes> EncodeFsHeader(const FsHeader& h);

// Decodes untrusted bytes (at least the first 64 of a file). Pure: no I/O, no allocation beyond
// the error message. INVALID_ARGUMENT names what is wrong (short, magic, version, checksum, ...).
Result<FsHeader> DecodeFsHeader(std::span<const uint8_t> bytes);

// The escaped file name of `key`; INVALID_ARGUMENT for an empty key or one whose name would be
// longer than kFsMaxNameBytes.
Result<std::string> FsObjectName(std::string_view key);

// The key whose escaped file name is `name`; nullopt for a name FsObjectName cannot produce (a
// temp file, a stray file someone else put there).
std::optional<std::string> FsKeyFromName(std::string_view name);

// "3f/a0" for depth 2; "" for depth 0.
std::string FsShardDir(uint64_t key_hash, uint32_t depth);

// The path of `key`'s file relative to the connector's directory: shard dir + "/" + name.
Result<std::string> FsObjectPath(std::string_view key, uint32_t depth);

inline bool IsFsTempName(std::string_view name) { return name.starts_with(kFsTempPrefix); }

}  // namespace kvtier
