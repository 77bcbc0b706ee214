// The strict, bounded Mooncake trace parser (trace_file.h).
#include "bench/server/trace_file.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <fstream>

namespace kvtier::bench {

namespace {

using nlohmann::json;

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// A non-negative integer field; `required` false reads a missing field as 0.
Result<uint64_t> UnsignedField(const json& j, const char* name, bool required) {
  auto it = j.find(name);
  if (it == j.end()) {
    if (!required) return uint64_t{0};
    return Invalid(fmt::format("no \"{}\"", name));
  }
  if (!it->is_number_unsigned()) {
    return Invalid(fmt::format("\"{}\" must be a non-negative integer, got {}", name,
                               it->dump().substr(0, 40)));
  }
  return it->get<uint64_t>();
}

}  // namespace

Result<TraceRequest> ParseTraceLine(std::string_view line) {
  if (line.size() > kMaxTraceLineBytes) {
    return Invalid(fmt::format("line of {} bytes (limit {})", line.size(), kMaxTraceLineBytes));
  }
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid("not valid JSON");
  if (!j.is_object()) return Invalid("not a JSON object");
  TraceRequest r;
  auto ts = UnsignedField(j, "timestamp", true);
  if (!ts.ok()) return ts.status();
  auto in = UnsignedField(j, "input_length", true);
  if (!in.ok()) return in.status();
  auto out = UnsignedField(j, "output_length", false);
  if (!out.ok()) return out.status();
  r.timestamp_ms = *ts;
  r.input_length = *in;
  r.output_length = *out;
  auto ids = j.find("hash_ids");
  if (ids == j.end()) return Invalid("no \"hash_ids\"");
  if (!ids->is_array()) return Invalid("\"hash_ids\" must be an array of non-negative integers");
  if (ids->size() > kMaxTraceHashIds) {
    return Invalid(fmt::format("{} hash_ids (limit {})", ids->size(), kMaxTraceHashIds));
  }
  r.hash_ids.reserve(ids->size());
  for (const json& id : *ids) {
    if (!id.is_number_unsigned()) {
      return Invalid(fmt::format("hash_ids[{}] must be a non-negative integer, got {}",
                                 r.hash_ids.size(), id.dump().substr(0, 40)));
    }
    r.hash_ids.push_back(id.get<uint64_t>());
  }
  // Mooncake's traces hold ceil(input_length / 512) ids: anything else is another format.
  const uint64_t blocks = (r.input_length + kTraceBlockTokens - 1) / kTraceBlockTokens;
  if (r.input_length == 0 || blocks != r.hash_ids.size()) {
    return Invalid(fmt::format("input_length {} needs {} hash_ids (one per {} tokens), got {}",
                               r.input_length, blocks, kTraceBlockTokens, r.hash_ids.size()));
  }
  return r;
}

Result<std::vector<TraceRequest>> ReadTrace(const std::string& path, size_t limit) {
  std::ifstream in(path);
  if (!in) return Status(Code::kIoError, fmt::format("cannot open trace file {}", path));
  std::vector<TraceRequest> requests;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto r = ParseTraceLine(line);
    if (!r.ok()) return Invalid(fmt::format("{} line {}: {}", path, number, r.status().message()));
    if (!requests.empty() && r->timestamp_ms < requests.back().timestamp_ms) {
      return Invalid(fmt::format("{} line {}: timestamp {} is before the previous line's {}", path,
                                 number, r->timestamp_ms, requests.back().timestamp_ms));
    }
    requests.push_back(std::move(r).value());
    if (requests.size() == limit) break;
  }
  if (in.bad()) return Status(Code::kIoError, fmt::format("reading trace file {} failed", path));
  if (requests.empty()) return Invalid(fmt::format("trace file {} holds no requests", path));
  return requests;
}

}  // namespace kvtier::bench
