// Many small objects whose bytes follow from their number, for the takeover-at-scale tests
// (store_failover_scale_test, store_failover_kill_test): put through a StoreNode in batches, then
// read back with every byte compared, so a lost or torn object is counted, not guessed.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "store/node/store_node.h"

namespace kvtier::testing {

class NumberedObjects {
 public:
  static constexpr uint64_t kValueBytes = 16;

  explicit NumberedObjects(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string Key(uint64_t i) const { return fmt::format("{}-{:010d}", prefix_, i); }

  void Value(uint64_t i, uint8_t* out) const {
    for (uint64_t b = 0; b < kValueBytes; b += 8) std::memcpy(out + b, &i, 8);
    out[0] ^= 0xa5;
  }

  // Puts objects [0, n); false (with the test failed) at the first one refused.
  bool PutAll(store::StoreNode& node, uint64_t n) const {
    std::vector<std::string> keys;
    std::vector<uint8_t> bytes(kBatch * kValueBytes);
    std::vector<ConstBuffer> values;
    for (uint64_t first = 0; first < n; first += kBatch) {
      const uint64_t count = std::min<uint64_t>(kBatch, n - first);
      keys.clear();
      values.clear();
      for (uint64_t i = 0; i < count; ++i) {
        keys.push_back(Key(first + i));
        Value(first + i, bytes.data() + i * kValueBytes);
        values.push_back({bytes.data() + i * kValueBytes, kValueBytes});
      }
      const std::vector<Status> put = node.Put(keys, values, store::PutConfig{});
      for (size_t i = 0; i < count; ++i) {
        if (!put[i].ok()) {
          ADD_FAILURE() << keys[i] << ": " << put[i].ToString();
          return false;
        }
      }
    }
    return true;
  }

  struct Check {
    uint64_t missing = 0;
    uint64_t wrong = 0;
  };

  // Reads objects [0, n) back; the first few missing ones are named as test failures.
  Check ReadAll(store::StoreNode& node, uint64_t n) const {
    Check c;
    std::vector<std::string> keys;
    std::vector<uint8_t> bytes(kBatch * kValueBytes);
    std::vector<MutableBuffer> outs;
    uint8_t want[kValueBytes];
    for (uint64_t first = 0; first < n; first += kBatch) {
      const uint64_t count = std::min<uint64_t>(kBatch, n - first);
      keys.clear();
      outs.clear();
      for (uint64_t i = 0; i < count; ++i) {
        keys.push_back(Key(first + i));
        outs.push_back({bytes.data() + i * kValueBytes, kValueBytes});
      }
      const auto got = node.Get(keys, outs);
      for (uint64_t i = 0; i < count; ++i) {
        if (!got[i].ok()) {
          if (++c.missing <= 5) ADD_FAILURE() << keys[i] << ": " << got[i].status().ToString();
          continue;
        }
        Value(first + i, want);
        if (*got[i] != kValueBytes || std::memcmp(want, outs[i].data, kValueBytes) != 0) {
          ++c.wrong;
        }
      }
    }
    return c;
  }

 private:
  static constexpr size_t kBatch = 8192;
  std::string prefix_;
};

// A master's /healthz/leader answers 200 once its takeover is complete (the nodes reported).
inline bool LeaderComplete(uint16_t http_port) {
  httplib::Client http("127.0.0.1", http_port);
  http.set_connection_timeout(1);
  auto r = http.Get("/healthz/leader");
  return r && r->status == 200;
}

}  // namespace kvtier::testing
