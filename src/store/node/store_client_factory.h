// The store's setup(dict): a StoreClient from Mooncake-style config keys, the way the cache
// server's `store` L2 connector hands over every adapter key kvtier does not read itself. New
// store options are added here, never in the connector.
//
// Mode: `server_address` ("host:port" of a `kvtier node` on this host) makes a dummy client of
// that node; without it this process is embedded (a node of its own, with a segment).
// Keys (values are JSON strings or numbers; sizes also "4GB", "512MiB"):
//   embedded: local_hostname ["127.0.0.1", "host" or "host:port", no port = a free one],
//             master_server_addr ["127.0.0.1:50051"], global_segment_size [16 MiB],
//             local_buffer_size (accepted; an embedded client stages nothing),
//             auth_token_file (the store's shared secret, as `kvtier node --auth-token-file`)
//   dummy:    server_address, mem_pool_size [0], local_buffer_size [16 MiB]
//   both:     protocol ["tcp", the only one], rpc_timeout_ms [5000];
//             metadata_server, rdma_devices, engine (Mooncake's; accepted and ignored)
// Anything else, a key of the other mode, or a bad value: INVALID_PARAMS naming the key.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "store/client/dummy_client.h"
#include "store/node/embedded_client.h"

namespace kvtier::store {

struct StoreClientConfig {
  bool dummy = false;
  DummyOptions dummy_options;
  EmbeddedOptions embedded_options;
};

StoreResult<StoreClientConfig> ParseStoreClientConfig(const nlohmann::json& config);
StoreResult<std::unique_ptr<StoreClient>> CreateStoreClient(const StoreClientConfig& config);

}  // namespace kvtier::store
