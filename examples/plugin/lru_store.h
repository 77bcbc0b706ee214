// A byte-bounded in-memory map with least-recently-used eviction: the storage behind the example
// connector. It knows nothing about kvtier, so it can be read (and tested) on its own.
//
// Values are immutable and shared: Get hands out a reference-counted pointer, so a reader copies
// the bytes without holding the lock, and a value removed or evicted meanwhile stays valid until
// the last reader lets go. Every entry is charged its key's and its value's size.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvtier_example {

class LruStore {
 public:
  using Value = std::shared_ptr<const std::vector<uint8_t>>;
  enum class PutResult { kStored, kAlreadyPresent, kTooLarge };

  explicit LruStore(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // First writer wins: an existing key keeps its value. Evicts least recently used entries until
  // the new one fits; an entry larger than the whole capacity is refused.
  PutResult Put(const std::string& key, Value value);
  // nullptr when absent. A hit makes the key the most recently used.
  Value Get(const std::string& key);
  // Whether the key is present; a hit makes it the most recently used (a lookup announces a load).
  bool Touch(const std::string& key);
  bool Erase(const std::string& key);

 private:
  struct Entry {
    Value value;
    std::list<std::string>::iterator recency;  // position in recency_
  };
  static uint64_t Charge(const std::string& key, const Value& v) { return key.size() + v->size(); }
  void EraseLocked(std::unordered_map<std::string, Entry>::iterator it);

  const uint64_t capacity_;
  std::mutex mu_;
  uint64_t used_ = 0;                           // guarded by mu_
  std::list<std::string> recency_;              // front = most recently used; guarded by mu_
  std::unordered_map<std::string, Entry> map_;  // guarded by mu_
};

}  // namespace kvtier_example
