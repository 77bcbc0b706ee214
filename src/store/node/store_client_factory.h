// The store's setup(dict): a StoreClient from Mooncake-style config keys, the way the cache
// server's `store` L2 connector hands over every adapter key kvtier does not read itself. New
// store options are added here, never in the connector.
//
// Mode: `server_address` ("host:port" of a `kvtier node` on this host) makes a dummy client of
// that node; without it this process is embedded (a node of its own, with a segment).
// Keys (values are JSON strings or numbers; sizes also "4GB", "512MiB"):
//   embedded: local_hostname ["127.0.0.1", "host" or "host:port", no port = a free one],
//             master_server_addr (or master_server_address) ["127.0.0.1:50051"],
//             global_segment_size [16 MiB],
//             local_buffer_size (accepted; an embedded client stages nothing),
//             auth_token_file (the store's shared secret, as `kvtier node --auth-token-file`)
//   dummy:    server_address, mem_pool_size [0], local_buffer_size [16 MiB]
//   both:     protocol ["tcp"; any other, e.g. Mooncake's "rdma", runs over TCP with a note],
//             rpc_timeout_ms [5000]; metadata_server, rdma_devices, device_name, engine
//             (Mooncake's transport knobs; accepted and ignored)
// So that a Mooncake or LMCache config works unedited, an unknown key and a key of the other mode
// are ignored, each with a note (StoreClientConfig::notes, which callers log); a bad value of a
// known key is INVALID_PARAMS naming the key.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/client/dummy_client.h"
#include "store/node/embedded_client.h"

namespace kvtier::store {

struct StoreClientConfig {
  bool dummy = false;
  std::vector<std::string> notes;  // keys ignored, and why
  DummyOptions dummy_options;
  EmbeddedOptions embedded_options;
};

Result<StoreClientConfig> ParseStoreClientConfig(const nlohmann::json& config);
Result<std::unique_ptr<StoreClient>> CreateStoreClient(const StoreClientConfig& config);

}  // namespace kvtier::store
