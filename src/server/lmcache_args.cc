#include "server/lmcache_args.h"

#include <fmt/format.h>

#include <limits>

namespace kvtier::lmcache {
namespace {

// Every element takes at least one byte, so a part's containers may claim at most its size in
// elements altogether; msgpack allocates a container's slots when it reads the header, so the
// claims are added up before unpacking.
class ClaimBudget : public msgpack::null_visitor {
 public:
  explicit ClaimBudget(size_t bytes) : left_(bytes) {}
  bool start_array(uint32_t n) { return Take(n); }
  bool start_map(uint32_t n) { return Take(uint64_t{n} * 2); }
  void parse_error(size_t, size_t) {}
  void insufficient_bytes(size_t, size_t) {}

 private:
  bool Take(uint64_t n) {
    if (n > left_) return false;
    left_ -= n;
    return true;
  }
  uint64_t left_;
};

Refusal Bad(std::string_view what, std::string_view want) {
  return Refusal{"bad_argument", fmt::format("'{}' must be {}", what, want)};
}

// GetInt without its Part overload, for GetList.
constexpr auto kInt = [](const msgpack::object& o, std::string_view what, int64_t& out) {
  return GetInt(o, what, out);
};

std::string_view AsView(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

// Calls fn(key, value) for each entry of a map keyed by str; a refusal if `o` is not one.
template <typename Fn>
std::optional<Refusal> ForFields(const msgpack::object& o, std::string_view what, Fn fn) {
  if (o.type != msgpack::type::MAP) return Bad(what, "a map");
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) return Bad(what, "a map keyed by field name");
    if (auto e = fn(AsView(kv.key), kv.val)) return e;
  }
  return std::nullopt;
}

std::optional<Refusal> Missing(std::string_view what, std::string_view field) {
  return Refusal{"bad_argument", fmt::format("'{}' has no field '{}'", what, field)};
}

template <typename T, typename Get>
std::optional<Refusal> GetList(const msgpack::object& o, std::string_view what, std::vector<T>& out,
                               Get get) {
  if (o.type != msgpack::type::ARRAY) return Bad(what, "an array");
  out.resize(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    if (auto e = get(o.via.array.ptr[i], what, out[i])) return e;
  }
  return std::nullopt;
}

// The ext-1 payload: a msgpack map tagged "type" (platform/base/ipc_wire.py). Unknown fields are
// refused, as LMCache's own decoder does.
std::optional<Refusal> DecodeDescriptor(const msgpack::object& o, TensorDesc& out) {
  if (o.type != msgpack::type::EXT || o.via.ext.type() != 1) {
    return Bad("kv_cache[]", "msgpack ext type 1 (a device IPC wrapper)");
  }
  auto payload = Part::Parse(std::string_view(o.via.ext.data(), o.via.ext.size));
  if (!payload.ok()) return payload.error();
  const msgpack::object& m = payload->obj();
  bool has_meta = false;
  int64_t version = 0;
  std::vector<std::string_view> extra;  // fields of other wrapper types
  auto e = ForFields(
      m, "kv_cache[]", [&](std::string_view k, const msgpack::object& v) -> std::optional<Refusal> {
        if (k == "type") return GetStr(v, "type", out.type);
        if (k == "version") return GetInt(v, "version", version);
        if (k == "shm_name") return GetStr(v, "shm_name", out.shm_name);
        if (k == "nbytes") return GetUint(v, "nbytes", out.nbytes);
        if (k != "metadata") {
          extra.push_back(k);
          return std::nullopt;
        }
        has_meta = true;
        return ForFields(
            v, "metadata",
            [&](std::string_view f, const msgpack::object& x) -> std::optional<Refusal> {
              if (f == "dtype") return GetStr(x, "dtype", out.dtype);
              if (f == "shape") return GetList(x, "shape", out.shape, kInt);
              if (f == "stride") return GetList(x, "stride", out.stride, kInt);
              if (f == "storage_offset") return GetInt(x, "storage_offset", out.storage_offset);
              if (f == "device_uuid") return GetStr(x, "device_uuid", out.device_uuid);
              return Refusal{"bad_argument",
                             fmt::format("descriptor metadata field '{}' is unknown", f)};
            });
      });
  if (e) return e;
  if (out.type.empty()) return Missing("kv_cache[]", "type");
  if (version != 1) return Bad("kv_cache[].version", "1");
  if (!has_meta) return Missing("kv_cache[]", "metadata");
  if (out.type != "cpu_shm") {  // decoded further, or refused naming the type, by the front
    out.wire.assign(o.via.ext.data(), o.via.ext.size);
    return std::nullopt;
  }
  if (!extra.empty()) {
    return Refusal{"bad_argument",
                   fmt::format("cpu_shm descriptor field '{}' is unknown", extra.front())};
  }
  if (out.shm_name.empty()) return Missing("cpu_shm descriptor", "shm_name");
  if (out.shape.size() != out.stride.size() || out.shape.empty()) {
    return Bad("metadata", "a shape and a stride of the same, non-zero rank");
  }
  return std::nullopt;
}

std::optional<Refusal> DecodeGroup(const msgpack::object& o, std::string_view, GroupInfo& out) {
  bool has_tpb = false;
  auto e =
      ForFields(o, "engine_group_infos[]",
                [&](std::string_view k, const msgpack::object& v) -> std::optional<Refusal> {
                  if (k == "engine_group_id")
                    return GetU32(v, "engine_group_id", out.engine_group_id);
                  if (k == "layer_indices")
                    return GetList(v, "layer_indices", out.layer_indices, GetU32);
                  if (k == "tokens_per_block") {
                    has_tpb = true;
                    return GetU32(v, "tokens_per_block", out.tokens_per_block);
                  }
                  return std::nullopt;  // sw_size_tokens, extra_object_group_tag, recurrent_state
                });
  if (e) return e;
  if (!has_tpb) return Missing("engine_group_infos[]", "tokens_per_block");
  return std::nullopt;
}

}  // namespace

Decoding<Part> Part::Parse(std::string_view bytes) {
  const size_t n = bytes.size();
  {
    ClaimBudget budget(n);
    size_t off = 0;
    bool ok = false;
    try {
      ok = msgpack::parse(bytes.data(), n, off, budget) && off == n;
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) {
      return Refusal{"bad_msgpack",
                     "not one whole msgpack document (truncated, malformed, "
                     "trailing bytes, or containers claiming more than it holds)"};
    }
  }
  Part p;
  try {
    size_t off = 0;
    msgpack::unpack_limit limit(n, n, n, n, n, 16);
    p.handle_ = std::make_shared<msgpack::object_handle>(
        msgpack::unpack(bytes.data(), n, off, nullptr, nullptr, limit));
  } catch (const std::exception& e) {
    return Refusal{"bad_msgpack", fmt::format("not msgpack: {}", e.what())};
  }
  return p;
}

std::optional<Refusal> GetInt(const msgpack::object& o, std::string_view what, int64_t& out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(what, "an int64");
    }
    out = static_cast<int64_t>(o.via.u64);
    return std::nullopt;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = o.via.i64;
    return std::nullopt;
  }
  return Bad(what, "an int");
}

std::optional<Refusal> GetUint(const msgpack::object& o, std::string_view what, uint64_t& out) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return Bad(what, "an int >= 0");
  out = o.via.u64;
  return std::nullopt;
}

std::optional<Refusal> GetU32(const msgpack::object& o, std::string_view what, uint32_t& out) {
  uint64_t v = 0;
  if (auto e = GetUint(o, what, v)) return e;
  if (v > std::numeric_limits<uint32_t>::max()) return Bad(what, "an int below 2^32");
  out = static_cast<uint32_t>(v);
  return std::nullopt;
}

std::optional<Refusal> GetStr(const msgpack::object& o, std::string_view what, std::string& out) {
  if (o.type != msgpack::type::STR) return Bad(what, "a str");
  out.assign(o.via.str.ptr, o.via.str.size);
  return std::nullopt;
}

std::optional<Refusal> GetBool(const msgpack::object& o, std::string_view what, bool& out) {
  if (o.type != msgpack::type::BOOLEAN) return Bad(what, "a bool");
  out = o.via.boolean;
  return std::nullopt;
}

std::optional<Refusal> GetFloat(const msgpack::object& o, std::string_view what, double& out) {
  if (o.type == msgpack::type::FLOAT64 || o.type == msgpack::type::FLOAT32) {
    out = o.via.f64;
    return std::nullopt;
  }
  int64_t i = 0;
  if (GetInt(o, what, i)) return Bad(what, "a float");
  out = static_cast<double>(i);
  return std::nullopt;
}

std::optional<Refusal> DecodeKey(const Part& p, Key& out) {
  constexpr std::string_view kRequired[] = {"model_name", "world_size", "worker_id", "token_ids",
                                            "start",      "end",        "request_id"};
  uint32_t seen = 0;  // bit i: kRequired[i]
  auto e = ForFields(p.obj(), "key",
                     [&](std::string_view k, const msgpack::object& v) -> std::optional<Refusal> {
                       for (size_t i = 0; i < std::size(kRequired); ++i) {
                         if (k == kRequired[i]) seen |= 1u << i;
                       }
                       if (k == "model_name") return GetStr(v, "key.model_name", out.model_name);
                       if (k == "world_size") return GetU32(v, "key.world_size", out.world_size);
                       if (k == "worker_id") {
                         if (v.type == msgpack::type::NIL) return std::nullopt;
                         uint32_t id = 0;
                         if (auto bad = GetU32(v, "key.worker_id", id)) return bad;
                         out.worker_id = id;
                         return std::nullopt;
                       }
                       if (k == "token_ids")
                         return GetList(v, "key.token_ids", out.token_ids, GetU32);
                       if (k == "start") return GetUint(v, "key.start", out.start);
                       if (k == "end") return GetUint(v, "key.end", out.end);
                       if (k == "request_id") return GetStr(v, "key.request_id", out.request_id);
                       if (k == "cache_salt") return GetStr(v, "key.cache_salt", out.cache_salt);
                       if (k == "num_kv_readers")
                         return GetU32(v, "key.num_kv_readers", out.num_kv_readers);
                       return std::nullopt;  // request_configs: nothing kvtier acts on
                     });
  if (e) return e;
  for (size_t i = 0; i < std::size(kRequired); ++i) {
    if (!(seen & (1u << i))) return Missing("key", kRequired[i]);
  }
  if (out.num_kv_readers < 1) return Bad("key.num_kv_readers", ">= 1");
  return std::nullopt;
}

Decoding<Args> DecodeRegister(const std::vector<Part>& a) {
  RegisterKvCache out;
  if (auto e = GetUint(a[0], "instance_id", out.instance_id)) return *e;
  if (auto e = GetList(a[1].obj(), "kv_cache", out.kv_cache,
                       [](const msgpack::object& o, std::string_view, TensorDesc& d) {
                         return DecodeDescriptor(o, d);
                       })) {
    return *e;
  }
  if (auto e = GetStr(a[2], "model_name", out.model_name)) return *e;
  if (auto e = GetU32(a[3].obj(), "world_size", out.world_size)) return *e;
  if (auto e = GetStr(a[4], "engine_type", out.engine_type)) return *e;
  if (auto e =
          ForFields(a[5].obj(), "layout_hints",
                    [&](std::string_view k, const msgpack::object& v) -> std::optional<Refusal> {
                      if (k == "kv_layout" && v.type == msgpack::type::STR)
                        out.kv_layout = AsView(v);
                      return std::nullopt;
                    })) {
    return *e;
  }
  if (auto e = GetList(a[6].obj(), "engine_group_infos", out.groups, DecodeGroup)) return *e;
  return Args(std::move(out));
}

Decoding<Args> DecodeTransfer(const std::vector<Part>& a, bool retrieve) {
  Transfer out;
  if (auto e = DecodeKey(a[0], out.key)) return *e;
  if (auto e = GetUint(a[1], "instance_id", out.instance_id)) return *e;
  auto inner = [](const msgpack::object& o, std::string_view what, std::vector<uint32_t>& ids) {
    return GetList(o, what, ids, GetU32);
  };
  if (auto e = GetList(a[2].obj(), "block_ids", out.block_ids, inner)) return *e;
  const msgpack::object& ev = a[3].obj();
  if (ev.type != msgpack::type::BIN) return Bad("event_ipc_handle", "a bin");
  out.event_handle.assign(ev.via.bin.ptr, ev.via.bin.size);
  if (retrieve) {
    if (auto e = GetUint(a[4], "skip_first_n_tokens", out.skip_first_n_tokens)) return *e;
  }
  if (!out.key.worker_id) return Bad("key.worker_id", "set (a worker's rank) in a transfer");
  return Args(std::move(out));
}

Decoding<Args> DecodeBlockAllocation(const std::vector<Part>& a) {
  ReportBlockAllocation out;
  if (auto e = GetUint(a[0], "instance_id", out.instance_id)) return *e;
  if (auto e = GetStr(a[1], "model_name", out.model_name)) return *e;
  if (a[2].obj().type != msgpack::type::ARRAY) return Bad("records", "an array");
  out.records = a[2].obj().via.array.size;
  return Args(std::move(out));
}

}  // namespace kvtier::lmcache
