// Helpers for connector tests: build a connector from JSON and wait for one task's completion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "connectors/completion_router.h"
#include "connectors/connector_registry.h"

namespace kvtier::testing {

inline std::unique_ptr<Connector> MakeConnector(const std::string& json) {
  auto cfg = ParseAdapterConfig(json, 0);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!cfg.ok()) return nullptr;
  auto conn = ConnectorRegistry::WithBuiltins().Create(*cfg);
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  return conn.ok() ? std::move(conn).value() : nullptr;
}

// Submits through a private router and waits (at most `limit`) for the completion.
inline Completion Await(Connector& c, ConnectorOp op,
                        const std::function<TaskId(Connector&)>& submit,
                        std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  CompletionRouter router({&c});
  auto f = router.Submit(0, op, submit);
  if (f.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "no completion within " << limit.count() << " ms";
    c.Close();
  }
  router.Stop();
  return f.get();
}

// `lookup_now` (a LookupNow) once it answers: right after a connector starts, no pool thread may
// have left an idle connection yet. nullopt after 10 s.
inline std::optional<Completion> FirstAnswer(
    const std::function<std::optional<Completion>()>& lookup_now) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto done = lookup_now();
    if (done || std::chrono::steady_clock::now() > until) return done;
    // Polls for a thread to park its connection (no clock involved), bounded by `until`.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
inline std::optional<Completion> LookupNowWhenIdle(Connector& c,
                                                   const std::vector<std::string>& keys) {
  return FirstAnswer([&] { return c.LookupNow(keys); });
}

inline Completion StoreAll(Connector& c, const std::vector<std::string>& keys,
                           const std::vector<std::vector<uint8_t>>& values) {
  std::vector<ConstBuffer> src;
  for (const auto& v : values) src.push_back({v.data(), v.size()});
  return Await(c, ConnectorOp::kWrite, [&](Connector& x) { return x.SubmitWrite(keys, src); });
}

inline Completion LoadAll(Connector& c, const std::vector<std::string>& keys,
                          std::vector<std::vector<uint8_t>>& out) {
  std::vector<MutableBuffer> dst;
  for (auto& v : out) dst.push_back({v.data(), v.size()});
  return Await(c, ConnectorOp::kLoad, [&](Connector& x) { return x.SubmitLoad(keys, dst); });
}

// Every key loads back byte for byte.
inline void ExpectLoads(Connector& c, const std::vector<std::string>& keys,
                        const std::vector<std::vector<uint8_t>>& values) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& v : values) out.emplace_back(v.size(), 0xEE);
  auto ld = LoadAll(c, keys, out);
  EXPECT_TRUE(ld.status.ok()) << ld.status.ToString();
  EXPECT_EQ(ld.Hits(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(out[i] == values[i]) << "key " << i;
}

inline Completion LookupAll(Connector& c, const std::vector<std::string>& keys) {
  return Await(c, ConnectorOp::kLookup, [&](Connector& x) { return x.SubmitLookup(keys); });
}

inline Completion RemoveAll(Connector& c, const std::vector<std::string>& keys) {
  return Await(c, ConnectorOp::kRemove, [&](Connector& x) { return x.SubmitRemove(keys); });
}

// n values of `size` bytes whose contents depend on the seed and index.
inline std::vector<std::vector<uint8_t>> Values(size_t n, size_t size, uint8_t seed = 1) {
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(size));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < size; ++j) out[i][j] = static_cast<uint8_t>(seed * 31 + i * 7 + j);
  }
  return out;
}

inline std::vector<std::string> Keys(size_t n, const std::string& prefix = "m@00000000@0@") {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(1000 + i));
  return out;
}

}  // namespace kvtier::testing
