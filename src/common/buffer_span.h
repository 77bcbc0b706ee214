// A caller's byte buffer named by pointer and size, read-only or writable: what a connector or
// the store node is handed to store from or load into. Plain views; the caller keeps the memory
// alive for as long as the callee's contract says (connector.h, store_node.h).
// Installed with connectors/connector.h: out-of-tree connector plugins use these types.
#pragma once

#include <cstdint>

namespace kvtier {

struct ConstBuffer {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

struct MutableBuffer {
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

// One copy of `bytes` from `src` to `dst` (host memory, or device memory where a CUDA copy takes
// it: cuda::Copy is this type).
struct MemCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
};

}  // namespace kvtier
