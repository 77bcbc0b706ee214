// The argument decoders of the LMCache MP codec (lmcache_codec.h): one msgpack part per argument,
// checked against lmcache 0.5.6's types (msgspec: structs as maps keyed by field name, the KV
// cache handles as ext type 1 holding a msgpack map tagged "type").
// Thread-safety: free functions over their arguments only.
#pragma once

#include <cstdint>
#include <memory>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/lmcache_codec.h"

namespace kvtier::lmcache {

// A decoded value, or the refusal that stopped decoding.
template <typename T>
class Decoding {
 public:
  Decoding(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Decoding(Refusal refusal) : v_(std::move(refusal)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& operator*() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  T value() && { return std::get<0>(std::move(v_)); }
  const Refusal& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Refusal> v_;
};

// One msgpack document (a frame, or an ext's payload), parsed with limits that keep a small
// frame from claiming large allocations.
class Part {
 public:
  static Decoding<Part> Parse(std::string_view bytes);
  const msgpack::object& obj() const { return handle_->get(); }
  bool IsNil() const { return obj().type == msgpack::type::NIL; }

 private:
  std::shared_ptr<msgpack::object_handle> handle_;
};

// Typed reads of one value; nullopt when it has the type, else the refusal naming `what`.
std::optional<Refusal> GetInt(const msgpack::object& o, std::string_view what, int64_t& out);
std::optional<Refusal> GetUint(const msgpack::object& o, std::string_view what, uint64_t& out);
std::optional<Refusal> GetU32(const msgpack::object& o, std::string_view what, uint32_t& out);
std::optional<Refusal> GetStr(const msgpack::object& o, std::string_view what, std::string& out);
std::optional<Refusal> GetBool(const msgpack::object& o, std::string_view what, bool& out);
std::optional<Refusal> GetFloat(const msgpack::object& o, std::string_view what, double& out);
inline std::optional<Refusal> GetInt(const Part& p, std::string_view what, int64_t& out) {
  return GetInt(p.obj(), what, out);
}
inline std::optional<Refusal> GetUint(const Part& p, std::string_view what, uint64_t& out) {
  return GetUint(p.obj(), what, out);
}
inline std::optional<Refusal> GetStr(const Part& p, std::string_view what, std::string& out) {
  return GetStr(p.obj(), what, out);
}
inline std::optional<Refusal> GetBool(const Part& p, std::string_view what, bool& out) {
  return GetBool(p.obj(), what, out);
}
inline std::optional<Refusal> GetFloat(const Part& p, std::string_view what, double& out) {
  return GetFloat(p.obj(), what, out);
}

// IPCCacheServerKey.
std::optional<Refusal> DecodeKey(const Part& p, Key& out);
// register_kv_cache's seven parts.
Decoding<Args> DecodeRegister(const std::vector<Part>& a);
// store's four parts, or retrieve's five.
Decoding<Args> DecodeTransfer(const std::vector<Part>& a, bool retrieve);
// report_block_allocation's three parts (the records are counted, not kept).
Decoding<Args> DecodeBlockAllocation(const std::vector<Part>& a);

}  // namespace kvtier::lmcache
