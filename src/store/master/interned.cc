// Process-wide intern tables (see interned.h).
#include "store/master/interned.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "store/master/segment_pool.h"

namespace kvtier::store {
namespace {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Never destroyed: interned pointers live in objects that may outlive static destruction.
struct Texts {
  std::mutex mu;
  std::unordered_set<std::string, TextHash, std::equal_to<>> set;
};
Texts& GlobalTexts() {
  static Texts* texts = new Texts;
  return *texts;
}

const std::string& EmptyText() {
  static const std::string* empty = new std::string;
  return *empty;
}

// Per thread, the last texts seen by their hash: the put path interns the same few node ids.
constexpr size_t kCacheSlots = 64;

const std::string* InternText(std::string_view text) {
  if (text.empty()) return &EmptyText();
  struct Slot {
    size_t hash = 0;
    const std::string* text = nullptr;
  };
  thread_local std::array<Slot, kCacheSlots> cache;
  const size_t hash = TextHash{}(text);
  Slot& slot = cache[hash % kCacheSlots];
  if (slot.text != nullptr && slot.hash == hash && *slot.text == text) return slot.text;
  Texts& texts = GlobalTexts();
  std::lock_guard lock(texts.mu);
  auto it = texts.set.find(text);
  if (it == texts.set.end()) it = texts.set.emplace(text).first;
  slot = Slot{hash, &*it};
  return slot.text;
}

// Mounts: blocks of kBlock entries that never move, found by id without a lock.
constexpr size_t kBlockBits = 10;
constexpr size_t kBlock = size_t{1} << kBlockBits;
constexpr size_t kMaxBlocks = size_t{1} << 16;  // 64M mounts per process

struct MountKey {
  uint64_t segment_id;
  uint64_t generation;
  const std::string* endpoint;
  bool operator==(const MountKey&) const = default;
};
struct MountKeyHash {
  size_t operator()(const MountKey& k) const {
    return std::hash<uint64_t>{}(k.segment_id * 0x9e3779b97f4a7c15ULL ^ k.generation) ^
           std::hash<const void*>{}(k.endpoint);
  }
};

struct Mounts {
  std::mutex mu;
  std::unordered_map<MountKey, MountId, MountKeyHash> ids;
  std::array<std::atomic<InternedMount*>, kMaxBlocks> blocks{};
  std::atomic<size_t> count{0};
};
Mounts& GlobalMounts() {
  static Mounts* mounts = new Mounts;
  return *mounts;
}

}  // namespace

InternedString::InternedString() : text_(&EmptyText()) {}
InternedString::InternedString(std::string_view text) : text_(InternText(text)) {}

MountId InternMount(const MountRef& mount, const InternedString& endpoint) {
  const MountKey key{mount.segment_id, mount.generation, &endpoint.str()};
  struct Slot {
    MountKey key{0, 0, nullptr};
    MountId id = 0;
  };
  thread_local std::array<Slot, kCacheSlots> cache;
  Slot& slot = cache[MountKeyHash{}(key) % kCacheSlots];
  if (slot.id != 0 && slot.key == key) return slot.id;
  Mounts& m = GlobalMounts();
  std::lock_guard lock(m.mu);
  auto [it, fresh] = m.ids.try_emplace(key, 0);
  if (fresh) {
    const size_t index = m.count.load(std::memory_order_relaxed);
    if ((index >> kBlockBits) >= kMaxBlocks) std::abort();  // 64M mounts: never in practice
    auto& block = m.blocks[index >> kBlockBits];
    if (block.load(std::memory_order_relaxed) == nullptr) {
      block.store(new InternedMount[kBlock], std::memory_order_release);
    }
    block.load(std::memory_order_relaxed)[index & (kBlock - 1)] =
        InternedMount{mount.segment_id, mount.generation, endpoint};
    m.count.store(index + 1, std::memory_order_release);
    it->second = static_cast<MountId>(index + 1);
  }
  slot = Slot{key, it->second};
  return it->second;
}

const InternedMount& MountOf(MountId id) {
  const size_t index = id - 1;
  return GlobalMounts().blocks[index >> kBlockBits].load(
      std::memory_order_acquire)[index & (kBlock - 1)];
}

size_t InternedMounts() { return GlobalMounts().count.load(std::memory_order_acquire); }

}  // namespace kvtier::store
