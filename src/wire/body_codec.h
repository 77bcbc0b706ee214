// Message bodies are msgpack maps keyed by field name. BodyReader gives typed access with errors
// that name the field; BodyWriter builds a map without knowing its size up front. Unknown fields
// are ignored, missing optional ones keep their defaults: that is how the protocol grows.
#pragma once

#include <msgpack.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/hashing.h"
#include "common/status.h"

namespace kvtier::wire {

class BodyReader {
 public:
  // Parses `size` bytes that must hold exactly one msgpack map. Sizes inside the body are
  // limited by the body's own size, so a short frame cannot make the parser allocate gigabytes.
  static Result<BodyReader> Parse(const void* data, size_t size);

  bool Has(std::string_view key) const;  // present and not nil

  // Required fields: missing -> INVALID_ARGUMENT "missing field 'x'".
  Status Get(std::string_view key, uint64_t& out) const;
  Status Get(std::string_view key, uint32_t& out) const;
  Status Get(std::string_view key, std::string& out) const;
  Status Get(std::string_view key, BodyReader& out) const;  // nested map
  // A required str field without a copy: valid while this reader (or a copy of it) lives.
  Status GetView(std::string_view key, std::string_view& out) const;
  // Optional fields: missing or nil leaves `out` unchanged.
  Status GetOptional(std::string_view key, uint64_t& out) const;
  Status GetOptional(std::string_view key, uint32_t& out) const;
  Status GetOptional(std::string_view key, bool& out) const;
  Status GetOptional(std::string_view key, std::string& out) const;
  // Raw bytes: a msgpack bin (PutBin).
  Status GetOptionalBin(std::string_view key, std::string& out) const;
  // uint32 lists: a msgpack array of uints or a bin of little-endian uint32 (fast path).
  Status GetOptional(std::string_view key, std::vector<uint32_t>& out) const;
  // Chunk hashes: one bin whose length is a multiple of 16.
  Status GetOptional(std::string_view key, std::vector<ChunkHash>& out) const;
  // An array of arrays of uints (e.g. layout regions), each inner array of exactly `width`.
  Status GetRows(std::string_view key, size_t width, std::vector<std::vector<uint64_t>>& out) const;
  // The same rows, row after row in one vector (no allocation per row).
  Status GetRows(std::string_view key, size_t width, std::vector<uint64_t>& flat) const;
  // Every numeric field of a flat map (used by STATS).
  std::vector<std::pair<std::string, double>> Numbers() const;

 private:
  const msgpack::object* Find(std::string_view key) const;
  std::shared_ptr<msgpack::object_handle> handle_;  // keeps the zone alive for nested readers
  const msgpack::object* map_ = nullptr;
};

class BodyWriter {
 public:
  BodyWriter();
  BodyWriter& Put(std::string_view key, uint64_t v);
  BodyWriter& Put(std::string_view key, int64_t v);
  BodyWriter& Put(std::string_view key, uint32_t v) { return Put(key, uint64_t{v}); }
  BodyWriter& Put(std::string_view key, int v) { return Put(key, int64_t{v}); }
  BodyWriter& Put(std::string_view key, double v);
  BodyWriter& Put(std::string_view key, bool v);
  BodyWriter& Put(std::string_view key, std::string_view v);
  BodyWriter& Put(std::string_view key, const char* v) { return Put(key, std::string_view(v)); }
  BodyWriter& PutNil(std::string_view key);
  BodyWriter& PutBin(std::string_view key, std::string_view bytes);
  BodyWriter& PutU32Bin(std::string_view key, const std::vector<uint32_t>& v);
  BodyWriter& PutHashes(std::string_view key, const std::vector<ChunkHash>& v);
  BodyWriter& PutRows(std::string_view key, const std::vector<std::vector<uint64_t>>& rows);
  // The same encoding from `flat`: rows of `width` values each, one after another.
  BodyWriter& PutRows(std::string_view key, size_t width, const std::vector<uint64_t>& flat);
  // One str that is the concatenation of `parts`, written without joining them first.
  BodyWriter& PutJoined(std::string_view key, const std::vector<std::string>& parts);
  BodyWriter& PutMap(std::string_view key, BodyWriter& nested);
  // The encoded map; the writer must not be used afterwards.
  std::string Finish();

 private:
  void Key(std::string_view key);
  msgpack::sbuffer buf_;
  msgpack::packer<msgpack::sbuffer> pk_;
  uint32_t count_ = 0;
};

}  // namespace kvtier::wire
