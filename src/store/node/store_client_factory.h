// The store's setup(dict): a StoreClient from Mooncake-style config keys. The one parser of them:
// the cache server's `store` L2 connector hands it every adapter key kvtier does not read itself,
// and Python's DistributedStore.setup / setup_dummy hand it their arguments as one dict
// (python/bindings/store_config.h). New store options are added here, never in a caller.
//
// Mode: `server_address` ("host:port" of a `kvtier node` on this host) makes a dummy client of
// that node; without it this process is embedded (a node of its own, with a segment).
// Keys (values are JSON strings, numbers or booleans; sizes also "4GB", "512MiB"; a null value
// is the key left out):
//   embedded: local_hostname ["127.0.0.1"; "host", "host:port" or "[v6]:port", no port = a free
//             one, "localhost" = 127.0.0.1, spaces around it dropped],
//             master_server_addr or master_server_address ["127.0.0.1:50051"; "host:port" or
//             "etcd://HOST:PORT[;HOST:PORT][/CLUSTER_ID]" for masters that fail over],
//             global_segment_size [16 MiB],
//             local_buffer_size (accepted; an embedded client stages nothing),
//             auth_token_file (the store's shared secret, as `kvtier node --auth-token-file`)
//   dummy:    server_address, mem_pool_size [0], local_buffer_size [16 MiB]
//   both:     protocol ["tcp"; any other, e.g. Mooncake's "rdma", runs over TCP with a note],
//             rpc_timeout_ms [5000], tenant_id ["default" or "": anything else is refused],
//             enable_ssd_offload [false: true is refused], enable_client_http_server [true is
//             ignored with a note], ipc_socket_path [ignored with a note: the node's socket
//             follows from server_address]; metadata_server, rdma_devices, device_name, engine,
//             ssd_offload_path, client_http_port (Mooncake's transport and server knobs;
//             accepted and ignored without a note, as every Mooncake config sets some)
// So that a Mooncake or LMCache config works unedited, an unknown key and a key of the other mode
// are ignored, each with a note (StoreClientConfig::notes, which callers log); a bad value of a
// known key is INVALID_PARAMS naming the key.
//
// Where the C++ and Python parsers used to disagree, the rule kept (issue 37):
//   ipc_socket_path: Python silent, C++ "unknown" -> known, ignored with a note;
//   metadata_server, rdma_devices: both ignored -> ignored, no note (rdma_devices named in no
//     note: protocol's note covers it);
//   tenant_id, enable_ssd_offload, enable_client_http_server, ssd_offload_path,
//     client_http_port: Python's checks, C++ "unknown" -> Python's checks, in both callers;
//   master_server_address: an alias in both -> an alias, the refusal naming the key as given;
//   master_server_addr "etcd://...": Python accepted, C++ refused -> accepted, parsed here;
//   local_hostname: Python stripped spaces -> stripped; "localhost" -> 127.0.0.1 in both;
//     Python's setup(dict) required it, the connector defaults it -> ParseRules says which;
//   server_address in setup(dict): Python ignored it with a warning -> a dummy client, as for
//     the connector;
//   null values: Python's defaults, C++ refused some -> null is the key left out;
//   protocol not a string: Python took str() of it -> refused (a string is required).
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

// What a caller requires beyond the keys' own rules: Mooncake's setup() needs local_hostname
// (the connector defaults it), setup_dummy() needs server_address.
struct ParseRules {
  bool require_local_hostname = false;
  bool require_server_address = false;
};

Result<StoreClientConfig> ParseStoreClientConfig(const nlohmann::json& config,
                                                 const ParseRules& rules = {});
Result<std::unique_ptr<StoreClient>> CreateStoreClient(const StoreClientConfig& config);

}  // namespace kvtier::store
