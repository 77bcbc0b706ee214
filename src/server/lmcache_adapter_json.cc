#include "server/lmcache_adapter_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace kvtier {
namespace {

using nlohmann::json;

// What one adapter's translation is working on: the LMCache object, the kvtier object being
// built, and the keys already taken.
class Translation {
 public:
  Translation(json in, int index) : in_(std::move(in)), index_(index) {}

  // A refusal naming this adapter.
  Status Refuse(const std::string& what) const {
    return Status(
        Code::kInvalidArgument,
        fmt::format("lmcache server flag --l2-adapter #{} ({}): {}", index_, type(), what));
  }
  std::string type() const { return in_.value("type", std::string()); }
  bool Has(const char* key) const { return in_.contains(key); }
  const json& Get(const char* key) {
    taken_.insert(key);
    return in_.at(key);
  }

  // LMCache key `from` as kvtier key `to`, when present; `check` says what the value must be.
  template <typename Check>
  Status Rename(const char* from, const char* to, Check check, const char* must_be) {
    if (!Has(from)) return Status::Ok();
    const json& v = Get(from);
    if (!check(v)) return Refuse(fmt::format("'{}' must be {}", from, must_be));
    out_[to] = v;
    return Status::Ok();
  }
  Status RenameCapacity(const char* from) {  // LMCache's GB capacity, 0 = unbounded
    if (!Has(from)) return Status::Ok();
    const json& v = Get(from);
    if (!v.is_number() || v.get<double>() < 0) {
      return Refuse(fmt::format("'{}' must be a number >= 0", from));
    }
    if (v.get<double>() > 0) out_["max_gb"] = v;
    return Status::Ok();
  }
  void Drop(const char* key, const char* why) {
    if (!Has(key)) return;
    taken_.insert(key);
    Note(key, why);
  }
  void Note(const char* key, const char* why) {
    notes_.push_back(fmt::format("lmcache server flag --l2-adapter #{} ({}): '{}' ignored: {}",
                                 index_, type(), key, why));
  }
  // The first key nobody took, refused by name.
  Status RefuseLeftovers() const {
    for (const auto& [key, value] : in_.items()) {
      if (taken_.count(key) == 0) {
        return Refuse(
            fmt::format("key '{}' is not supported by kvtier (kvtier-only keys go in kvtier's own "
                        "--l2-adapter, given before --protocol)",
                        key));
      }
    }
    return Status::Ok();
  }
  json& out() { return out_; }
  TranslatedAdapter Finish() { return {out_.dump(), std::move(notes_)}; }

 private:
  json in_;
  int index_;
  json out_ = json::object();
  std::set<std::string> taken_{"type"};
  std::vector<std::string> notes_;
};

bool IsString(const json& v) { return v.is_string() && !v.get<std::string>().empty(); }
bool IsBool(const json& v) { return v.is_boolean(); }
bool IsPositiveInt(const json& v) { return v.is_number_unsigned() && v.get<uint64_t>() > 0; }
bool IsPort(const json& v) {
  return v.is_number_unsigned() && v.get<uint64_t>() > 0 && v.get<uint64_t>() <= 65535;
}

// The keys LMCache's config base class reads for every adapter type.
Status TranslateCommonKeys(Translation& t) {
  if (t.Has("affinity_tag") && t.Get("affinity_tag") != "_default") {
    return t.Refuse("'affinity_tag' other than \"_default\": kvtier has one L1, no tagged L1s");
  }
  if (t.Has("shared")) (void)t.Get("shared");  // kvtier never assumes an adapter is its alone
  if (t.Has("persist_enabled") && t.Get("persist_enabled") != true) {
    return t.Refuse(
        "'persist_enabled' false: kvtier leaves an adapter's objects in place at "
        "shutdown");
  }
  if (t.Has("serde")) {
    return t.Refuse("'serde' is not supported by kvtier: it stores values as they are");
  }
  if (!t.Has("eviction")) return Status::Ok();
  const json& ev = t.Get("eviction");
  if (!ev.is_object()) return t.Refuse("'eviction' must be an object");
  for (const auto& [key, value] : ev.items()) {
    if (key == "eviction_policy") {
      if (value == "LRU") {
        t.out()["eviction_policy"] = "LRU";
      } else if (value == "ARC" || value == "IsolatedLRU") {
        return t.Refuse(fmt::format(
            "eviction policy {} is not supported by kvtier: its L2 policies are LRU and S3FIFO",
            value.dump()));
      } else if (value != "noop") {
        return t.Refuse("'eviction.eviction_policy' must be LRU, ARC, IsolatedLRU or noop");
      }
    } else if (key != "trigger_watermark" && key != "eviction_ratio") {
      return t.Refuse(fmt::format("key 'eviction.{}' is not supported by kvtier", key));
    }
  }
  for (const char* key : {"trigger_watermark", "eviction_ratio"}) {
    if (ev.contains(key)) {
      t.Note(key == std::string("eviction_ratio") ? "eviction.eviction_ratio"
                                                  : "eviction.trigger_watermark",
             "kvtier trims an adapter to its capacity right after each write");
    }
  }
  return Status::Ok();
}

Status TranslateFs(Translation& t, bool native) {
  t.out()["type"] = "fs";
  if (!t.Has("base_path")) return t.Refuse("'base_path' is required");
  KVT_RETURN_IF_ERROR(t.Rename("base_path", "path", IsString, "a non-empty string"));
  KVT_RETURN_IF_ERROR(t.Rename("use_odirect", "use_odirect", IsBool, "a boolean"));
  t.Drop("relative_tmp_dir", "kvtier's fs adapter places its own temporary files");
  t.Drop("read_ahead_size", "kvtier's fs adapter has no read-ahead setting");
  if (native) {
    KVT_RETURN_IF_ERROR(
        t.Rename("num_workers", "num_threads", IsPositiveInt, "a positive integer"));
    KVT_RETURN_IF_ERROR(t.RenameCapacity("max_capacity_gb"));
  }
  return Status::Ok();
}

Status TranslateResp(Translation& t) {
  t.out()["type"] = "resp";
  if (!t.Has("host") || !t.Has("port")) return t.Refuse("'host' and 'port' are required");
  KVT_RETURN_IF_ERROR(t.Rename("host", "host", IsString, "a non-empty string"));
  KVT_RETURN_IF_ERROR(t.Rename("port", "port", IsPort, "a port number"));
  for (const char* key : {"username", "password"}) {  // LMCache's "" means none
    if (t.Has(key) && t.Get(key) != "") {
      KVT_RETURN_IF_ERROR(t.Rename(key, key, IsString, "a string"));
    }
  }
  KVT_RETURN_IF_ERROR(t.Rename("num_workers", "num_threads", IsPositiveInt, "a positive integer"));
  return t.RenameCapacity("max_capacity_gb");
}

// kvtier's store adapter reads Mooncake's setup keys under their own names (docs/connectors/
// store.md) and refuses the ones it does not know, naming them.
Status TranslateMooncakeStore(Translation& t, const json& in) {
  t.out()["type"] = "mooncake_store";
  for (const auto& [key, value] : in.items()) {
    if (key == "type" || key == "eviction" || key == "affinity_tag" || key == "shared" ||
        key == "persist_enabled" || key == "serde") {
      continue;
    }
    t.out()[key] = t.Get(key.c_str());
  }
  return Status::Ok();
}

Status TranslateMock(Translation& t) {
  t.out()["type"] = "mem";
  if (!t.Has("max_size_gb")) return t.Refuse("'max_size_gb' is required");
  KVT_RETURN_IF_ERROR(t.RenameCapacity("max_size_gb"));
  t.Drop("mock_bandwidth_gb", "kvtier's mem adapter is not throttled");
  return Status::Ok();
}

// LMCache 0.5.6's other adapter types, and why kvtier has no counterpart.
const char* MissingTypeReason(const std::string& type) {
  static const std::pair<const char*, const char*> kMissing[] = {
      {"valkey", "for a single Valkey or Redis server use type resp"},
      {"plugin",
       "LMCache's plugins are Python classes; kvtier's plugin adapter loads a C "
       "library (docs/connectors/plugins.md)"},
      {"native_plugin", "kvtier's plugin adapter has its own C ABI (docs/connectors/plugins.md)"},
      {"p2p", "kvtier has no LMCache peer-to-peer transfer"},
      {"aerospike", ""},
      {"bigtable", ""},
      {"dax", ""},
      {"fault_inject", ""},
      {"hf3fs", ""},
      {"hfbucket", ""},
      {"nixl_native", ""},
      {"nixl_store", ""},
      {"nixl_store_dynamic", ""},
      {"raw_block", ""},
      {"s3", ""},
      {"sagemaker-hyperpod", ""},
  };
  for (const auto& [name, why] : kMissing) {
    if (type == name) return why;
  }
  return nullptr;
}

}  // namespace

Result<TranslatedAdapter> TranslateLmcacheAdapter(std::string_view lmcache_json, int index) {
  json in = json::parse(lmcache_json, nullptr, /*allow_exceptions=*/false);
  const std::string where = fmt::format("lmcache server flag --l2-adapter #{}", index);
  if (in.is_discarded() || !in.is_object()) {
    return Status(Code::kInvalidArgument, where + ": not a JSON object");
  }
  if (!in.contains("type") || !in["type"].is_string()) {
    return Status(Code::kInvalidArgument, where + ": missing 'type'");
  }
  Translation t(in, index);
  const std::string type = t.type();
  Status s;
  if (type == "fs" || type == "fs_native") {
    s = TranslateFs(t, type == "fs_native");
  } else if (type == "resp") {
    s = TranslateResp(t);
  } else if (type == "mooncake_store") {
    s = TranslateMooncakeStore(t, in);
  } else if (type == "mock") {
    s = TranslateMock(t);
  } else if (const char* why = MissingTypeReason(type)) {
    return t.Refuse(fmt::format(
        "adapter type '{}' is not supported by kvtier{}{} (kvtier takes fs, fs_native, resp, "
        "mooncake_store and mock)",
        type, *why ? ": " : "", why));
  } else {
    return t.Refuse(fmt::format("'{}' is not an adapter type of lmcache 0.5.6", type));
  }
  KVT_RETURN_IF_ERROR(s);
  KVT_RETURN_IF_ERROR(TranslateCommonKeys(t));
  KVT_RETURN_IF_ERROR(t.RefuseLeftovers());
  return t.Finish();
}

}  // namespace kvtier
