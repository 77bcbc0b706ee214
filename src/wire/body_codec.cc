#include "wire/body_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace kvtier::wire {
namespace {

Status FieldError(std::string_view key, std::string_view want) {
  return Status(Code::kInvalidArgument, fmt::format("field '{}' must be {}", key, want));
}

Status Missing(std::string_view key) {
  return Status(Code::kInvalidArgument, fmt::format("missing field '{}'", key));
}

bool AsUint(const msgpack::object& o, uint64_t& out) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return false;
  out = o.via.u64;
  return true;
}

// Every element of a valid body takes at least one byte, so the containers of a body can declare
// at most `size` elements in all. msgpack allocates a container's slots when it reads its header,
// so a few nested headers claiming millions of elements each would cost gigabytes before the
// parser noticed the bytes are missing; this pass adds up the claims first and refuses the lie.
class ClaimedElementsCheck : public msgpack::null_visitor {
 public:
  explicit ClaimedElementsCheck(size_t size) : budget_(size) {}
  bool start_array(uint32_t n) { return Spend(n); }
  bool start_map(uint32_t n) { return Spend(uint64_t{n} * 2); }
  void parse_error(size_t, size_t) {}
  void insufficient_bytes(size_t, size_t) {}

 private:
  bool Spend(uint64_t n) {
    if (n > budget_) return false;
    budget_ -= n;
    return true;
  }
  uint64_t budget_;
};

}  // namespace

Result<BodyReader> BodyReader::Parse(const void* data, size_t size) {
  BodyReader r;
  const auto n = static_cast<std::size_t>(size);
  {
    ClaimedElementsCheck check(size);
    std::size_t off = 0;
    bool ok = false;
    try {
      ok = msgpack::parse(static_cast<const char*>(data), size, off, check);
    } catch (const std::exception&) {
      ok = false;  // unpack below reports the precise error
    }
    if (!ok) {
      return Status(Code::kProtocolError,
                    "body is not valid msgpack: truncated, malformed, or containers claim more "
                    "elements than the body holds");
    }
  }
  msgpack::unpack_limit limit(n, n, n, n, n, 32);
  try {
    std::size_t off = 0;
    r.handle_ = std::make_shared<msgpack::object_handle>(
        msgpack::unpack(static_cast<const char*>(data), size, off, nullptr, nullptr, limit));
    if (off != size) {
      return Status(Code::kProtocolError,
                    fmt::format("body has {} trailing bytes after the map", size - off));
    }
  } catch (const std::exception& e) {
    return Status(Code::kProtocolError, fmt::format("body is not valid msgpack: {}", e.what()));
  }
  r.map_ = &r.handle_->get();
  if (r.map_->type != msgpack::type::MAP) {
    return Status(Code::kProtocolError, "body must be a msgpack map");
  }
  return r;
}

const msgpack::object* BodyReader::Find(std::string_view key) const {
  if (map_ == nullptr) return nullptr;
  const auto& m = map_->via.map;
  for (uint32_t i = 0; i < m.size; ++i) {
    const auto& k = m.ptr[i].key;
    if (k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == key) {
      const auto* v = &m.ptr[i].val;
      return v->type == msgpack::type::NIL ? nullptr : v;
    }
  }
  return nullptr;
}

bool BodyReader::Has(std::string_view key) const { return Find(key) != nullptr; }

Status BodyReader::Get(std::string_view key, uint64_t& out) const {
  if (!Has(key)) return Missing(key);
  return GetOptional(key, out);
}

Status BodyReader::Get(std::string_view key, uint32_t& out) const {
  if (!Has(key)) return Missing(key);
  return GetOptional(key, out);
}

Status BodyReader::Get(std::string_view key, std::string& out) const {
  if (!Has(key)) return Missing(key);
  return GetOptional(key, out);
}

Status BodyReader::Get(std::string_view key, BodyReader& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Missing(key);
  if (o->type != msgpack::type::MAP) return FieldError(key, "a map");
  out.handle_ = handle_;
  out.map_ = o;
  return Status::Ok();
}

Status BodyReader::GetView(std::string_view key, std::string_view& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Missing(key);
  if (o->type != msgpack::type::STR) return FieldError(key, "a string");
  out = std::string_view(o->via.str.ptr, o->via.str.size);
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, uint64_t& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (!AsUint(*o, out)) return FieldError(key, "a non-negative integer");
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, uint32_t& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  uint64_t v = 0;
  if (!AsUint(*o, v) || v > UINT32_MAX) return FieldError(key, "an integer in [0, 2^32)");
  out = static_cast<uint32_t>(v);
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, bool& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (o->type != msgpack::type::BOOLEAN) return FieldError(key, "a boolean");
  out = o->via.boolean;
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, std::string& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (o->type != msgpack::type::STR) return FieldError(key, "a string");
  out.assign(o->via.str.ptr, o->via.str.size);
  return Status::Ok();
}

Status BodyReader::GetOptionalBin(std::string_view key, std::string& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (o->type != msgpack::type::BIN) return FieldError(key, "a bin");
  out.assign(o->via.bin.ptr, o->via.bin.size);
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, std::vector<uint32_t>& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (o->type == msgpack::type::BIN) {
    if (o->via.bin.size % 4 != 0) return FieldError(key, "a bin whose length is a multiple of 4");
    out.resize(o->via.bin.size / 4);
    if (!out.empty()) std::memcpy(out.data(), o->via.bin.ptr, o->via.bin.size);  // little-endian
    return Status::Ok();
  }
  if (o->type != msgpack::type::ARRAY) return FieldError(key, "an array of uint32 or a bin");
  out.resize(o->via.array.size);
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    uint64_t v = 0;
    if (!AsUint(o->via.array.ptr[i], v) || v > UINT32_MAX) {
      return FieldError(key, "an array of uint32 or a bin");
    }
    out[i] = static_cast<uint32_t>(v);
  }
  return Status::Ok();
}

Status BodyReader::GetOptional(std::string_view key, std::vector<ChunkHash>& out) const {
  const auto* o = Find(key);
  if (o == nullptr) return Status::Ok();
  if (o->type != msgpack::type::BIN || o->via.bin.size % sizeof(ChunkHash) != 0) {
    return FieldError(key, "a bin of 16-byte chunk hashes");
  }
  out.resize(o->via.bin.size / sizeof(ChunkHash));
  if (!out.empty()) std::memcpy(out.data(), o->via.bin.ptr, o->via.bin.size);
  return Status::Ok();
}

Status BodyReader::GetRows(std::string_view key, size_t width,
                           std::vector<std::vector<uint64_t>>& out) const {
  std::vector<uint64_t> flat;
  if (Status s = GetRows(key, width, flat); !s.ok()) return s;
  // The row count from the array itself: with width 0, `flat` holds none of it.
  out.assign(Find(key)->via.array.size, std::vector<uint64_t>(width));
  for (size_t i = 0; i < out.size(); ++i) {
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(i * width), width, out[i].begin());
  }
  return Status::Ok();
}

Status BodyReader::GetRows(std::string_view key, size_t width, std::vector<uint64_t>& flat) const {
  const auto* o = Find(key);
  if (o == nullptr) return Missing(key);
  auto bad = [&] { return FieldError(key, fmt::format("an array of [{}-integer] arrays", width)); };
  if (o->type != msgpack::type::ARRAY) return bad();
  flat.resize(size_t{o->via.array.size} * width);
  uint64_t* next = flat.data();
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const auto& row = o->via.array.ptr[i];
    if (row.type != msgpack::type::ARRAY || row.via.array.size != width) return bad();
    for (size_t j = 0; j < width; ++j) {
      if (!AsUint(row.via.array.ptr[j], *next++)) return bad();
    }
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, double>> BodyReader::Numbers() const {
  std::vector<std::pair<std::string, double>> out;
  if (map_ == nullptr) return out;
  const auto& m = map_->via.map;
  for (uint32_t i = 0; i < m.size; ++i) {
    const auto& k = m.ptr[i].key;
    const auto& v = m.ptr[i].val;
    if (k.type != msgpack::type::STR) continue;
    std::string name(k.via.str.ptr, k.via.str.size);
    if (v.type == msgpack::type::POSITIVE_INTEGER) {
      out.emplace_back(name, static_cast<double>(v.via.u64));
    } else if (v.type == msgpack::type::NEGATIVE_INTEGER) {
      out.emplace_back(name, static_cast<double>(v.via.i64));
    } else if (v.type == msgpack::type::FLOAT64 || v.type == msgpack::type::FLOAT32) {
      out.emplace_back(name, v.via.f64);
    }
  }
  return out;
}

// The map header is written as map32 with a zero count and patched in Finish(): valid msgpack,
// and callers never have to count their fields.
BodyWriter::BodyWriter() : pk_(buf_) {
  const char header[5] = {static_cast<char>(0xdf), 0, 0, 0, 0};
  buf_.write(header, sizeof(header));
}

void BodyWriter::Key(std::string_view key) {
  pk_.pack_str(static_cast<uint32_t>(key.size()));
  pk_.pack_str_body(key.data(), static_cast<uint32_t>(key.size()));
  ++count_;
}

BodyWriter& BodyWriter::Put(std::string_view key, uint64_t v) {
  Key(key);
  pk_.pack_uint64(v);
  return *this;
}

BodyWriter& BodyWriter::Put(std::string_view key, int64_t v) {
  Key(key);
  pk_.pack_int64(v);
  return *this;
}

BodyWriter& BodyWriter::Put(std::string_view key, double v) {
  Key(key);
  pk_.pack_double(v);
  return *this;
}

BodyWriter& BodyWriter::Put(std::string_view key, bool v) {
  Key(key);
  if (v) {
    pk_.pack_true();
  } else {
    pk_.pack_false();
  }
  return *this;
}

BodyWriter& BodyWriter::Put(std::string_view key, std::string_view v) {
  Key(key);
  pk_.pack_str(static_cast<uint32_t>(v.size()));
  pk_.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
  return *this;
}

BodyWriter& BodyWriter::PutBin(std::string_view key, std::string_view bytes) {
  Key(key);
  pk_.pack_bin(static_cast<uint32_t>(bytes.size()));
  pk_.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
  return *this;
}

BodyWriter& BodyWriter::PutNil(std::string_view key) {
  Key(key);
  pk_.pack_nil();
  return *this;
}

BodyWriter& BodyWriter::PutU32Bin(std::string_view key, const std::vector<uint32_t>& v) {
  Key(key);
  const auto bytes = static_cast<uint32_t>(v.size() * sizeof(uint32_t));
  pk_.pack_bin(bytes);
  pk_.pack_bin_body(reinterpret_cast<const char*>(v.data()), bytes);
  return *this;
}

BodyWriter& BodyWriter::PutHashes(std::string_view key, const std::vector<ChunkHash>& v) {
  Key(key);
  const auto bytes = static_cast<uint32_t>(v.size() * sizeof(ChunkHash));
  pk_.pack_bin(bytes);
  pk_.pack_bin_body(reinterpret_cast<const char*>(v.data()), bytes);
  return *this;
}

BodyWriter& BodyWriter::PutRows(std::string_view key,
                                const std::vector<std::vector<uint64_t>>& rows) {
  Key(key);
  pk_.pack_array(static_cast<uint32_t>(rows.size()));
  for (const auto& row : rows) {
    pk_.pack_array(static_cast<uint32_t>(row.size()));
    for (uint64_t v : row) pk_.pack_uint64(v);
  }
  return *this;
}

BodyWriter& BodyWriter::PutRows(std::string_view key, size_t width,
                                const std::vector<uint64_t>& flat) {
  Key(key);
  const size_t rows = width == 0 ? 0 : flat.size() / width;
  pk_.pack_array(static_cast<uint32_t>(rows));
  for (size_t i = 0; i < rows; ++i) {
    pk_.pack_array(static_cast<uint32_t>(width));
    for (size_t j = 0; j < width; ++j) pk_.pack_uint64(flat[i * width + j]);
  }
  return *this;
}

BodyWriter& BodyWriter::PutJoined(std::string_view key, const std::vector<std::string>& parts) {
  Key(key);
  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  pk_.pack_str(static_cast<uint32_t>(total));
  for (const auto& p : parts) pk_.pack_str_body(p.data(), static_cast<uint32_t>(p.size()));
  return *this;
}

BodyWriter& BodyWriter::PutMap(std::string_view key, BodyWriter& nested) {
  Key(key);
  const std::string bytes = nested.Finish();
  buf_.write(bytes.data(), bytes.size());
  return *this;
}

std::string BodyWriter::Finish() {
  std::string out(buf_.data(), buf_.size());
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>((count_ >> (24 - 8 * i)) & 0xff);
  return out;
}

}  // namespace kvtier::wire
