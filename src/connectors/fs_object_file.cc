#include "connectors/fs_object_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

#include "common/endian.h"

namespace kvtier {
namespace {

constexpr std::array<uint8_t, 4> kMagic = {'K', 'V', 'F', 'S'};
constexpr size_t kHeaderHashAt = 56;

bool PlainNameByte(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '@' ||
         c == '.' || c == '_' || c == '-';
}

}  // namespace

uint64_t FsHash(std::span<const uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

uint64_t FsKeyHash(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

std::array<uint8_t, kFsHeaderBytes> EncodeFsHeader(const FsHeader& h) {
  std::array<uint8_t, kFsHeaderBytes> out{};
  uint8_t* p = out.data();
  std::memcpy(p, kMagic.data(), kMagic.size());
  StoreLE<uint16_t>(p + 4, kFsFormatVersion);
  StoreLE<uint16_t>(p + 6, kFsHeaderBytes);
  StoreLE<uint32_t>(p + 8, kFsPayloadOffset);
  StoreLE<uint32_t>(p + 12, 0);
  StoreLE<uint64_t>(p + 16, h.payload_length);
  StoreLE<uint64_t>(p + 24, h.payload_hash);
  StoreLE<uint64_t>(p + 32, h.key_hash);
  StoreLE<uint64_t>(p + kHeaderHashAt, XXH3_64bits(p, kHeaderHashAt));
  return out;
}

Result<FsHeader> DecodeFsHeader(std::span<const uint8_t> bytes) {
  auto bad = [](std::string why) { return Status(Code::kInvalidArgument, "fs header: " + why); };
  if (bytes.size() < kFsHeaderBytes) {
    return bad(fmt::format("{} bytes, need {}", bytes.size(), kFsHeaderBytes));
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic.data(), kMagic.size()) != 0) return bad("bad magic");
  // The checksum first: every field below is then known to be what the writer wrote.
  if (LoadLE<uint64_t>(p + kHeaderHashAt) != XXH3_64bits(p, kHeaderHashAt)) {
    return bad("checksum mismatch");
  }
  if (const uint64_t v = LoadLE<uint16_t>(p + 4); v != kFsFormatVersion) {
    return bad(fmt::format("version {} (this build reads {})", v, kFsFormatVersion));
  }
  if (const uint64_t n = LoadLE<uint16_t>(p + 6); n != kFsHeaderBytes) {
    return bad(fmt::format("header_bytes {} (expected {})", n, kFsHeaderBytes));
  }
  if (const uint64_t off = LoadLE<uint32_t>(p + 8); off != kFsPayloadOffset) {
    return bad(fmt::format("payload_offset {} (expected {})", off, kFsPayloadOffset));
  }
  if (LoadLE<uint32_t>(p + 12) != 0) return bad("unknown flags");
  for (size_t i = 40; i < kHeaderHashAt; ++i) {
    if (p[i] != 0) return bad("reserved bytes are not zero");
  }
  FsHeader h;
  h.payload_length = LoadLE<uint64_t>(p + 16);
  h.payload_hash = LoadLE<uint64_t>(p + 24);
  h.key_hash = LoadLE<uint64_t>(p + 32);
  return h;
}

Result<std::string> FsObjectName(std::string_view key) {
  if (key.empty()) return Status(Code::kInvalidArgument, "fs: empty key");
  std::string name;
  name.reserve(key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (PlainNameByte(c) && !(i == 0 && c == '.')) {
      name.push_back(static_cast<char>(c));
    } else {
      name += fmt::format("%{:02X}", c);
    }
    if (name.size() > kFsMaxNameBytes) {
      return Status(Code::kInvalidArgument,
                    fmt::format("fs: key of {} bytes is too long for a file name (escaped, at most "
                                "{} bytes)",
                                key.size(), kFsMaxNameBytes));
    }
  }
  return name;
}

std::optional<std::string> FsKeyFromName(std::string_view name) {
  std::string key;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c != '%') {
      if (!PlainNameByte(c) || (i == 0 && c == '.')) return std::nullopt;
      key.push_back(static_cast<char>(c));
      continue;
    }
    unsigned v = 0;
    if (i + 2 >= name.size()) return std::nullopt;
    for (size_t j = i + 1; j <= i + 2; ++j) {
      const char h = name[j];
      if (h >= '0' && h <= '9') {
        v = v * 16 + static_cast<unsigned>(h - '0');
      } else if (h >= 'A' && h <= 'F') {
        v = v * 16 + static_cast<unsigned>(h - 'A' + 10);
      } else {
        return std::nullopt;
      }
    }
    key.push_back(static_cast<char>(v));
    i += 2;
  }
  // One-to-one: only the name FsObjectName writes for this key counts (not "%41" for "A").
  Result<std::string> back = FsObjectName(key);
  if (!back.ok() || *back != name) return std::nullopt;
  return key;
}

std::string FsShardDir(uint64_t key_hash, uint32_t depth) {
  std::string dir;
  for (uint32_t i = 0; i < depth && i < 8; ++i) {
    if (i > 0) dir.push_back('/');
    dir += fmt::format("{:02x}", (key_hash >> (56 - 8 * i)) & 0xff);
  }
  return dir;
}

Result<std::string> FsObjectPath(std::string_view key, uint32_t depth) {
  Result<std::string> name = FsObjectName(key);
  if (!name.ok()) return name.status();
  if (depth == 0) return std::move(name).value();
  return FsShardDir(FsKeyHash(key), depth) + "/" + *name;
}

}  // namespace kvtier
