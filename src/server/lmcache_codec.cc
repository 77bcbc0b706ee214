// Framing, the operation table and replies of the LMCache MP protocol; the argument decoders
// (keys, KV cache descriptors, group infos) are in lmcache_args.cc.
#include "server/lmcache_codec.h"

#include <fmt/format.h>

#include <msgpack.hpp>

#include "server/lmcache_args.h"

namespace kvtier::lmcache {
namespace {

struct OpSpec {
  Op op;
  const char* name;
  size_t parts;  // argument parts after [uid, op], defaults included
};

// lmcache 0.5.6's RPC signatures (transport/base.py) for the operations decoded here.
constexpr OpSpec kOps[] = {
    {Op::kRegisterKvCache, "register_kv_cache", 7},
    {Op::kUnregisterKvCache, "unregister_kv_cache", 1},
    {Op::kStore, "store", 4},
    {Op::kRetrieve, "retrieve", 5},
    {Op::kLookup, "lookup", 2},
    {Op::kQueryPrefetchStatus, "query_prefetch_status", 1},
    {Op::kWaitPrefetchStatus, "wait_prefetch_status", 2},
    {Op::kFreeLookupLocks, "free_lookup_locks", 2},
    {Op::kEndSession, "end_session", 1},
    {Op::kClear, "clear", 1},
    {Op::kGetChunkSize, "get_chunk_size", 0},
    {Op::kPing, "ping", 1},
    {Op::kReportBlockAllocation, "report_block_allocation", 3},
    {Op::kNoop, "noop", 0},
    {Op::kGetExperimental, "get_experimental", 0},
    {Op::kSubscribeKvEvents, "subscribe_kv_events", 4},
};

// Operations of 0.5.6's table that exist but that this front does not serve, by id: named in
// the refusal so the log says what the client wanted.
const char* KnownUnservedName(int64_t id) {
  switch (id) {
    case 3:
      return "register_q_cache";
    case 4:
      return "unregister_q_cache";
    case 5:
      return "store_q";
    case 11:
      return "query_prefetch_lookup_hits (retired)";
    case 14:
      return "register_kv_cache_engine_driven_context";
    case 15:
      return "unregister_kv_cache_engine_driven_context";
    case 16:
      return "prepare_store";
    case 17:
      return "commit_store";
    case 18:
      return "prepare_retrieve";
    case 19:
      return "commit_retrieve";
    case 29:
      return "p2p_lookup_and_lock";
    case 30:
      return "p2p_query_lookup_results";
    case 31:
      return "p2p_unlock_objects";
    default:
      return (id >= 25 && id <= 28) || id == 33 ? "cb_* (CacheBlend)" : nullptr;
  }
}

Refusal Refuse(std::string reason, std::string detail) {
  return Refusal{std::move(reason), std::move(detail)};
}

Decoding<Args> DecodeArgs(Op op, const std::vector<Part>& a) {
  switch (op) {
    case Op::kRegisterKvCache:
      return DecodeRegister(a);
    case Op::kUnregisterKvCache: {
      InstanceArg out;
      if (auto e = GetUint(a[0], "instance_id", out.instance_id)) return *e;
      return Args(out);
    }
    case Op::kStore:
    case Op::kRetrieve:
      return DecodeTransfer(a, op == Op::kRetrieve);
    case Op::kLookup:
    case Op::kFreeLookupLocks: {
      KeyArg out;
      if (auto e = DecodeKey(a[0], out.key)) return *e;
      if (auto e = GetUint(a[1], "tp_size", out.tp_size)) return *e;
      return Args(std::move(out));
    }
    case Op::kQueryPrefetchStatus:
    case Op::kWaitPrefetchStatus:
    case Op::kEndSession: {
      RequestIdArg out;
      if (auto e = GetStr(a[0], "request_id", out.request_id)) return *e;
      if (op == Op::kWaitPrefetchStatus) {
        if (auto e = GetFloat(a[1], "timeout", out.timeout_s)) return *e;
      }
      return Args(std::move(out));
    }
    case Op::kClear: {
      ClearArg out;
      if (auto e = GetBool(a[0], "force", out.force)) return *e;
      return Args(out);
    }
    case Op::kPing: {
      PingArg out;
      if (!a[0].IsNil()) {
        uint64_t id = 0;
        if (auto e = GetUint(a[0], "instance_id", id)) return *e;
        out.instance_id = id;
      }
      return Args(out);
    }
    case Op::kReportBlockAllocation:
      return DecodeBlockAllocation(a);
    case Op::kSubscribeKvEvents: {
      SubscribeKvEvents out;
      if (auto e = GetUint(a[0], "instance_id", out.instance_id)) return *e;
      if (auto e = GetStr(a[1], "model_name", out.model_name)) return *e;
      if (auto e = GetUint(a[2], "cursor", out.cursor)) return *e;
      if (auto e = GetUint(a[3], "max_events", out.max_events)) return *e;
      return Args(std::move(out));
    }
    case Op::kGetChunkSize:
    case Op::kNoop:
    case Op::kGetExperimental:
      return Args(NoArgs{});
  }
  return Refuse("unknown_op", "no decoder");
}

// The op frame: an id of the frozen table or an operation's name.
Decoding<const OpSpec*> FindOp(const Part& op) {
  if (op.obj().type == msgpack::type::STR) {
    const std::string_view name(op.obj().via.str.ptr, op.obj().via.str.size);
    if (name == "subscribe_kv_events") return &kOps[std::size(kOps) - 1];
    return Refuse("unknown_op", fmt::format("operation '{}' is not one of lmcache 0.5.6's that "
                                            "kvtier serves",
                                            name));
  }
  int64_t id = 0;
  if (GetInt(op, "op", id)) return Refuse("bad_frame", "the op frame is neither an int nor a str");
  for (const OpSpec& s : kOps) {
    if (static_cast<int64_t>(s.op) == id && s.op != Op::kSubscribeKvEvents) return &s;
  }
  if (const char* name = KnownUnservedName(id)) {
    return Refuse("unsupported_op",
                  fmt::format("operation {} ({}) is not served by kvtier", id, name));
  }
  return Refuse("unknown_op", fmt::format("operation id {} is not in lmcache 0.5.6's table", id));
}

void Pack(msgpack::packer<msgpack::sbuffer>& pk, const Reply& r) {
  std::visit(
      [&pk](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          pk.pack_nil();
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool> ||
                             std::is_same_v<T, std::string>) {
          pk.pack(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          pk.pack_array(static_cast<uint32_t>(v.size()));
          for (const auto& s : v) pk.pack(s);
        } else {  // TransferResult: [bin, bool]
          pk.pack_array(2);
          pk.pack_bin(static_cast<uint32_t>(v.event_handle.size()));
          pk.pack_bin_body(v.event_handle.data(), static_cast<uint32_t>(v.event_handle.size()));
          pk.pack(v.ok);
        }
      },
      r);
}

}  // namespace

const char* OpName(Op op) {
  for (const OpSpec& s : kOps) {
    if (s.op == op) return s.name;
  }
  return "unknown";
}

Decoded Decode(const std::vector<std::string_view>& frames) {
  if (frames.size() < 2) {
    return Refuse("bad_frame",
                  fmt::format("{} frame(s); a request is [uid, op, args...]", frames.size()));
  }
  auto uid = Part::Parse(frames[0]);
  if (!uid.ok()) return uid.error();
  if (frames[1].empty()) {  // a stream's control message
    if (frames.size() == 3 && (frames[2] == "ack" || frames[2] == "cancel")) {
      return StreamControl{std::string(frames[0]), std::string(frames[2])};
    }
    return Refuse("bad_frame", "an empty op frame that is not a stream's ack or cancel");
  }
  int64_t uid_value = 0;
  if (GetInt(*uid, "uid", uid_value)) return Refuse("bad_frame", "the uid frame is not an int");
  auto op_part = Part::Parse(frames[1]);
  if (!op_part.ok()) return op_part.error();
  auto spec = FindOp(*op_part);
  if (!spec.ok()) return spec.error();
  const OpSpec& s = **spec;
  if (frames.size() - 2 != s.parts) {
    return Refuse("part_count",
                  fmt::format("{} carries {} argument part(s), lmcache 0.5.6 sends {}", s.name,
                              frames.size() - 2, s.parts));
  }
  std::vector<Part> args;
  for (size_t i = 2; i < frames.size(); ++i) {
    auto p = Part::Parse(frames[i]);
    if (!p.ok()) {
      Refusal r = p.error();
      r.detail = fmt::format("{} argument {}: {}", s.name, i - 2, r.detail);
      return r;
    }
    args.push_back(std::move(p).value());
  }
  auto decoded = DecodeArgs(s.op, args);
  if (!decoded.ok()) {
    Refusal r = decoded.error();
    r.detail = fmt::format("{}: {}", s.name, r.detail);
    return r;
  }
  return Request{std::string(frames[0]), std::string(frames[1]), s.op, std::move(decoded).value()};
}

std::vector<std::string> EncodeReply(const std::string& uid_frame, const std::string& op_frame,
                                     const Reply& result) {
  std::vector<std::string> out{uid_frame, op_frame};
  if (std::holds_alternative<std::monostate>(result)) return out;
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  Pack(pk, result);
  out.emplace_back(buf.data(), buf.size());
  return out;
}

}  // namespace kvtier::lmcache
