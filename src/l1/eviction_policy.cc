#include "l1/eviction_policy.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "l1/lru_policy.h"
#include "l1/noop_policy.h"
#include "l1/s3fifo_policy.h"

namespace kvtier {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  std::unique_ptr<EvictionPolicy> policy;
  if (EqualsIgnoreCase(name, "LRU")) {
    policy = std::make_unique<LruPolicy>();
  } else if (EqualsIgnoreCase(name, "S3FIFO")) {
    policy = std::make_unique<S3FifoPolicy>();
  } else if (EqualsIgnoreCase(name, "noop")) {
    policy = std::make_unique<NoopPolicy>();
  } else {
    return Status(Code::kInvalidArgument,
                  "unknown eviction policy '" + std::string(name) + "' (valid: LRU, S3FIFO, noop)");
  }
  return policy;
}

}  // namespace kvtier
