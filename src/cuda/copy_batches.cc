// The parts of gpu_memory.h that need no CUDA runtime.
#include <cctype>

#include "cuda/gpu_memory.h"

namespace kvtier::cuda {

std::string NormalizeUuid(std::string_view uuid) {
  if (uuid.substr(0, 4) == "GPU-" || uuid.substr(0, 4) == "gpu-") uuid.remove_prefix(4);
  std::string out;
  for (char c : uuid) {
    if (c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::vector<Copy> MergeAdjacent(std::vector<Copy> copies) {
  std::vector<Copy> out;
  out.reserve(copies.size());
  for (const Copy& c : copies) {
    if (!out.empty()) {
      Copy& last = out.back();
      if (static_cast<uint8_t*>(last.dst) + last.bytes == c.dst &&
          static_cast<const uint8_t*>(last.src) + last.bytes == c.src) {
        last.bytes += c.bytes;
        continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace kvtier::cuda
