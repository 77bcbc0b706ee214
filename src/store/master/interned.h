// Values the master would otherwise repeat in every object, kept once per process:
//  - InternedString: a node id (an object's writer) or an endpoint, as a pointer to the one copy
//    of its text, so it costs 8 bytes and no allocation per object, and compares by pointer;
//  - MountId: a 32-bit id for one (segment id, generation, endpoint), so an object's replica is
//    stored as 20 bytes (replica_list.h) instead of 64 plus a string.
// Interned values are never freed: a cluster has few node ids and endpoints, and one mount per
// segment mount (each a few dozen bytes). Reading an interned value takes no lock; interning one
// takes a process-wide mutex unless the calling thread's small cache already has it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace kvtier::store {

struct MountRef;

class InternedString {
 public:
  InternedString();  // ""
  // Implicit, so an InternedString field takes a std::string as a std::string field did.
  InternedString(std::string_view text);  // NOLINT(google-explicit-constructor)
  InternedString(const std::string& text) : InternedString(std::string_view(text)) {}  // NOLINT
  InternedString(const char* text) : InternedString(std::string_view(text)) {}         // NOLINT

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }  // NOLINT(google-explicit-constructor)
  std::string_view view() const { return *text_; }
  bool empty() const { return text_->empty(); }
  size_t size() const { return text_->size(); }
  const char* c_str() const { return text_->c_str(); }

  // One copy per text, so equal texts have equal pointers.
  friend bool operator==(const InternedString& a, const InternedString& b) {
    return a.text_ == b.text_;
  }
  friend bool operator==(const InternedString& a, const std::string& b) { return *a.text_ == b; }
  friend bool operator==(const InternedString& a, std::string_view b) { return *a.text_ == b; }
  friend bool operator==(const InternedString& a, const char* b) { return *a.text_ == b; }
  friend std::ostream& operator<<(std::ostream& os, const InternedString& s) {
    return os << *s.text_;
  }

 private:
  const std::string* text_;
};

// 0 is "no mount"; ids start at 1.
using MountId = uint32_t;

struct InternedMount {
  uint64_t segment_id = 0;
  uint64_t generation = 0;
  InternedString endpoint;
};

MountId InternMount(const MountRef& mount, const InternedString& endpoint);
// `id` must have come from InternMount.
const InternedMount& MountOf(MountId id);
// How many mounts have been interned (tests, memory reports).
size_t InternedMounts();

}  // namespace kvtier::store

template <>
struct fmt::formatter<kvtier::store::InternedString> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const kvtier::store::InternedString& s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(s.view(), ctx);
  }
};
