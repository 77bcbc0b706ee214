#include "connectors/adapter_config.h"

#include <fmt/format.h>

namespace kvtier {
namespace {

constexpr uint32_t kMaxThreads = 256;

// Where the bad JSON came from: the flag and the adapter's place, e.g. "--l2-adapter #2".
struct Origin {
  std::string_view flag;
  size_t position;
};

Status Bad(const Origin& at, const std::string& what) {
  return Status(Code::kInvalidArgument, fmt::format("{} #{}: {}", at.flag, at.position + 1, what));
}

Result<uint32_t> ThreadCount(const nlohmann::json& v, const Origin& at, const std::string& field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxThreads) {
    return Bad(at, fmt::format("{} must be an integer from 1 to {}, got {}", field, kMaxThreads,
                               v.dump()));
  }
  return v.get<uint32_t>();
}

}  // namespace

Result<AdapterConfig> ParseAdapterConfig(std::string_view json_text, size_t position,
                                         std::string_view flag) {
  auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Bad({flag, position}, fmt::format("not valid JSON: {}", json_text));
  }
  return AdapterConfigFromJson(j, position, flag);
}

Result<AdapterConfig> AdapterConfigFromJson(const nlohmann::json& j, size_t position,
                                            std::string_view flag) {
  const Origin at{flag, position};
  if (!j.is_object()) return Bad(at, "must be a JSON object such as {\"type\":\"fs\",...}");
  AdapterConfig cfg;
  auto& o = cfg.options;
  for (const auto& [key, v] : j.items()) {
    if (key == "type") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return Bad(at, "'type' must be a non-empty string");
      }
      o.type = v.get<std::string>();
    } else if (key == "num_threads" || key == "num_workers") {
      auto n = ThreadCount(v, at, key);
      if (!n.ok()) return n.status();
      o.num_threads = *n;
    } else if (key == "per_op_threads" || key == "per_op_workers") {
      if (!v.is_object()) return Bad(at, key + " must be an object of op pool -> threads");
      for (const auto& [pool, count] : v.items()) {
        auto op = OpPoolFromName(pool);
        if (!op) {
          return Bad(at, fmt::format("{} has unknown op pool '{}' (pools: lookup, load, write, "
                                     "remove)", key, pool));
        }
        auto n = ThreadCount(count, at, key + "." + pool);
        if (!n.ok()) return n.status();
        o.per_op_threads[static_cast<size_t>(*op)] = *n;
      }
    } else if (key == "max_inflight_mb") {
      // Bounded so the conversion to bytes cannot overflow (found by connectors_fuzzer).
      constexpr double kMaxInflightMb = 1 << 20;  // 1 TiB
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > kMaxInflightMb) {
        return Bad(at, fmt::format("max_inflight_mb must be a number > 0 and <= {}, got {}",
                                   kMaxInflightMb, v.dump()));
      }
      o.max_inflight_bytes = static_cast<uint64_t>(v.get<double>() * (1 << 20));
    } else if (key == "deadline_ms") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 3'600'000) {
        return Bad(at, fmt::format("deadline_ms must be an integer from 1 to 3600000, got {}",
                                   v.dump()));
      }
      o.deadline = std::chrono::milliseconds(v.get<int64_t>());
    } else if (key == "max_bytes") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) {
        return Bad(at, fmt::format("max_bytes must be an integer > 0, got {}", v.dump()));
      }
      o.max_bytes = v.get<uint64_t>();
    } else if (key == "max_gb") {
      constexpr double kMaxGb = 1 << 24;  // 16 PiB: the conversion to bytes cannot overflow
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > kMaxGb) {
        return Bad(at, fmt::format("max_gb must be a number > 0 and <= {}, got {}", kMaxGb,
                                   v.dump()));
      }
      o.max_bytes = static_cast<uint64_t>(v.get<double>() * (1ULL << 30));
    } else if (key == "eviction_policy") {
      if (!v.is_string()) return Bad(at, "eviction_policy must be \"LRU\" or \"S3FIFO\"");
      o.eviction_policy = v.get<std::string>();
    } else if (key == "exclusive") {
      if (!v.is_boolean()) {
        return Bad(at, fmt::format("exclusive must be true or false, got {}", v.dump()));
      }
      o.exclusive = v.get<bool>();
    } else {
      cfg.backend[key] = v;
    }
  }
  if (o.type.empty()) return Bad(at, "missing 'type'");
  if (j.contains("max_bytes") && j.contains("max_gb")) {
    return Bad(at, "give max_bytes or max_gb, not both");
  }
  // The old names of num_threads and per_op_threads are still read; both spellings is a mistake.
  for (const char* old : {"num_workers", "per_op_workers"}) {
    const std::string now = old == std::string("num_workers") ? "num_threads" : "per_op_threads";
    if (j.contains(old) && j.contains(now)) {
      return Bad(at, fmt::format("give {} or its old name {}, not both", now, old));
    }
  }
  o.name = fmt::format("{}#{}", o.type, position);
  return cfg;
}

}  // namespace kvtier
