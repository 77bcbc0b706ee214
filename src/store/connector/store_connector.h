// "type":"store" (also "mooncake_store"): the kvtier store as an L2 of the cache server.
// kvtier reads only its own adapter keys (adapter_config.h) and `preregister_l1_memory`
// [true]; every other key goes untouched to the store's setup (store/node/store_client_factory.h), which
// reports unknown or bad ones.
//
// Modes, as the store's setup chooses them:
//  - dummy (`server_address`): every worker thread of the connector is its own dummy client of
//    the node on this host, so the lanes never queue behind each other on one connection;
//  - embedded: the connector is a node itself (one shared client, threads call it at once).
// Memory: with preregister_l1_memory each dummy shares the regions of ConnectorEnv (the L1 arena)
// with the node once, at connect, and loads and stores name ranges inside them: the node copies
// straight between L1 and its segment (a buffer outside every region fails its key). Without
// it, each worker stages values through its dummy's mem pool (the store key mem_pool_size,
// 64 MiB when not given): one extra memcpy per value, and a tile larger than the pool runs in
// several calls. Embedded mode reaches L1 directly either way. The dummies never use the store's
// copying Put/Get, so their local buffer is 0 unless local_buffer_size is given.
//
// Every operation is one batch call to the store per tile: store = BatchPutFrom (an object that
// already exists counts as stored, first writer wins), lookup = BatchIsExist, load =
// BatchGetInto (an object of another size than its buffer is a miss), delete = BatchRemove.
// Calls are bounded by deadline_ms (the dummy's socket timeout); a node that is gone makes
// every call fail at once, so lookups become misses instead of waiting.
#pragma once

#include <nlohmann/json.hpp>

#include "connectors/connector_registry.h"

namespace kvtier {

ConnectorResult CreateStoreConnector(const ConnectorOptions& options,
                                     const nlohmann::json& backend, const ConnectorEnv& env);

// The built-ins plus "store" and "mooncake_store": the registry the cache server and
// `kvtier bench l2` use.
ConnectorRegistry ConnectorRegistryWithStore();

}  // namespace kvtier
