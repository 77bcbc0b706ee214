// PhaseSample's JSON (children report it over a pipe) and how a section adds up its trials.
#include "bench/store/store_results.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace kvtier::bench {

void AddError(std::vector<std::string>& errors, std::string e) {
  if (errors.size() < kMaxErrors) errors.push_back(std::move(e));
}

nlohmann::json PhaseSample::ToJson() const {
  return {{"start_ns", start_ns},   {"end_ns", end_ns},
          {"bytes", bytes},         {"batch_us", batch_us},
          {"verified_bytes", verified_bytes}, {"cpu_s", cpu_s},
          {"errors", errors}};
}

PhaseSample PhaseSample::FromJson(const nlohmann::json& j) {
  PhaseSample s;
  s.start_ns = j.value("start_ns", int64_t{0});
  s.end_ns = j.value("end_ns", int64_t{0});
  s.bytes = j.value("bytes", uint64_t{0});
  s.batch_us = j.value("batch_us", std::vector<double>{});
  s.verified_bytes = j.value("verified_bytes", uint64_t{0});
  s.cpu_s = j.value("cpu_s", 0.0);
  s.errors = j.value("errors", std::vector<std::string>{});
  return s;
}

namespace {

void AddPhase(const std::vector<PhaseSample>& samples, OpStats& op) {
  if (samples.empty()) return;
  int64_t first = samples[0].start_ns, last = samples[0].end_ns;
  uint64_t bytes = 0;
  for (const PhaseSample& s : samples) {
    first = std::min(first, s.start_ns);
    last = std::max(last, s.end_ns);
    bytes += s.bytes;
    op.batch_us.insert(op.batch_us.end(), s.batch_us.begin(), s.batch_us.end());
  }
  op.bytes += bytes;
  op.windows.emplace_back(first, last);
  if (last > first) op.gbps.push_back(static_cast<double>(bytes) / static_cast<double>(last - first));
}

}  // namespace

void TransferSection::AddTrial(const std::vector<PhaseSample>& puts,
                               const std::vector<PhaseSample>& gets, bool measured,
                               const CpuSplit& put_cpu, const CpuSplit& get_cpu,
                               const std::string& client_role) {
  for (const auto* phase : {&puts, &gets}) {
    for (const PhaseSample& s : *phase) errors.insert(errors.end(), s.errors.begin(), s.errors.end());
  }
  for (const PhaseSample& s : gets) {
    verified_bytes += s.verified_bytes;
    expected_verified_bytes += s.bytes;
  }
  if (!measured) return;
  AddPhase(puts, put);
  AddPhase(gets, get);
  for (auto [samples, cpu, op] : {std::tuple{&puts, &put_cpu, &put}, std::tuple{&gets, &get_cpu, &get}}) {
    for (const auto& [role, seconds] : *cpu) op->cpu_by_process[role] += seconds;
    for (const PhaseSample& s : *samples) op->cpu_by_process[client_role] += s.cpu_s;
    op->cpu_seconds = 0;
    for (const auto& [role, seconds] : op->cpu_by_process) op->cpu_seconds += seconds;
  }
}

bool TransferSection::verified() const {
  return unavailable.empty() && errors.empty() && expected_verified_bytes > 0 &&
         verified_bytes == expected_verified_bytes;
}

}  // namespace kvtier::bench
