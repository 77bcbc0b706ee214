// PLACEHOLDER — being written.
#include "connectors/builtin_connectors.h"
namespace kvtier {
ConnectorResult CreateFsConnector(const ConnectorOptions&, const nlohmann::json&) {
  return Status(Code::kUnavailable, "fs connector not built yet");
}
}  // namespace kvtier
