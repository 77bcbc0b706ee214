#include "store/protocol/store_key.h"

#include <fmt/format.h>

#include "common/printable.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {

Status CheckKey(std::string_view key) {
  if (key.empty()) return StoreError(ErrorCode::INVALID_PARAMS, "key is empty");
  if (key.size() > kMaxKeyBytes) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("key {} is longer than the limit of {} bytes", KeyForMessage(key),
                                  kMaxKeyBytes));
  }
  return Status::Ok();
}

std::string KeyForMessage(std::string_view key) { return "'" + PrintableText(key) + "'"; }

}  // namespace kvtier::store
