// PLACEHOLDER — being written.
#include "connectors/builtin_connectors.h"
namespace kvtier {
ConnectorResult CreateRespConnector(const ConnectorOptions&, const nlohmann::json&) {
  return Status(Code::kUnavailable, "resp connector not built yet");
}
}  // namespace kvtier
