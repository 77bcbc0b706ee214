// The plugin ABI: a connector shipped as a shared library exports one C function,
// `kvtier_connector_plugin`, returning a static descriptor. kvtier checks `abi_version` before it
// touches anything else, so a plugin built against other headers is refused at startup instead
// of crashing later. Bump KVTIER_CONNECTOR_ABI_VERSION whenever connector.h changes a type or
// a virtual function. Plugins must be built with the same C++ standard library as kvtier.
#pragma once

#include <cstddef>
#include <cstdint>

#include "connectors/connector.h"

#define KVTIER_CONNECTOR_ABI_VERSION 4
#define KVTIER_CONNECTOR_PLUGIN_SYMBOL "kvtier_connector_plugin"

extern "C" {

struct KvtierConnectorPlugin {
  uint32_t abi_version;  // KVTIER_CONNECTOR_ABI_VERSION of the headers the plugin was built with
  const char* name;      // for logs
  // Creates a connector from kvtier's options and the backend keys of the adapter JSON (a JSON
  // object as text). On failure returns nullptr and writes a message into err (NUL-terminated).
  kvtier::Connector* (*create)(const kvtier::ConnectorOptions* options, const char* backend_json,
                               char* err, size_t err_size);
  void (*destroy)(kvtier::Connector* connector);
};

// What a plugin defines (with extern "C" linkage and default visibility).
typedef const KvtierConnectorPlugin* (*KvtierConnectorPluginEntry)(void);

}  // extern "C"
