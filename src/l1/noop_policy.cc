#include "l1/noop_policy.h"

namespace kvtier {

void NoopPolicy::OnRemove(const ObjectKey&) {
  if (size_ > 0) --size_;
}

bool NoopPolicy::ForEachCandidate(const std::function<bool(const ObjectKey&)>&) {
  return false;  // no candidates, ever
}

}  // namespace kvtier
