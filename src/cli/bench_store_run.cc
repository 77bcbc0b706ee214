// PhaseSample's JSON (children report it over a pipe) and how a section adds up its trials.
#include "cli/bench_store_run.h"

#include <algorithm>

namespace kvtier::cli {

nlohmann::json PhaseSample::ToJson() const {
  return {{"start_ns", start_ns},   {"end_ns", end_ns},
          {"bytes", bytes},         {"batch_us", batch_us},
          {"verified_bytes", verified_bytes}, {"errors", errors}};
}

PhaseSample PhaseSample::FromJson(const nlohmann::json& j) {
  PhaseSample s;
  s.start_ns = j.value("start_ns", int64_t{0});
  s.end_ns = j.value("end_ns", int64_t{0});
  s.bytes = j.value("bytes", uint64_t{0});
  s.batch_us = j.value("batch_us", std::vector<double>{});
  s.verified_bytes = j.value("verified_bytes", uint64_t{0});
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
  if (last > first) op.gbps.push_back(static_cast<double>(bytes) / static_cast<double>(last - first));
}

}  // namespace

void TransferSection::AddTrial(const std::vector<PhaseSample>& puts,
                               const std::vector<PhaseSample>& gets, bool measured) {
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
}

bool TransferSection::verified() const {
  return unavailable.empty() && errors.empty() && expected_verified_bytes > 0 &&
         verified_bytes == expected_verified_bytes;
}

}  // namespace kvtier::cli
