// Which node of a Redis Cluster owns a key, for the resp connector's cluster mode: the key's hash
// slot (CRC16/XMODEM of the key, or of its hash tag, mod 16384, as the cluster spec defines it),
// the slot map as CLUSTER SLOTS reports it, and the text of -MOVED / -ASK redirections. Apart
// from the router (resp_cluster.h) so the arithmetic can be tested without a server.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "connectors/connector.h"
#include "connectors/resp_connection.h"

namespace kvtier {

inline constexpr size_t kRespClusterSlots = 16384;

// CRC16, polynomial 0x1021, initial value 0, no reflection (the spec's "XMODEM" variant).
uint16_t RespCrc16(std::string_view data);
// The slot of `key`: CRC16 of the bytes between the first '{' and the next '}' when that is not
// empty, else of the whole key; mod 16384.
uint16_t RespKeySlot(std::string_view key);

struct RespShard {
  std::string host;
  uint16_t port = 0;

  // "host:port" ("[::1]:7000" for IPv6), also the key of a connection to it.
  std::string Text() const;
  bool operator==(const RespShard&) const = default;
};

// "host:port" or "[v6]:port" -> node; nullopt when malformed or the port is not 1..65535.
std::optional<RespShard> ParseRespShard(std::string_view text);

struct RespSlotMap {
  std::vector<RespShard> primaries;
  std::vector<RespShard> replicas;  // not used for data; seeds for the next refresh
  // Index into `primaries` per slot; -1: no node reported for it (the cluster is incomplete).
  std::array<int16_t, kRespClusterSlots> owner;
  std::string source;  // the node it was read from, for messages

  RespSlotMap() { owner.fill(-1); }
};

// A redirection reply: "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381" (without '-').
// An empty host (a node that does not know its own address) means `asked`'s host.
struct RespRedirect {
  bool ask = false;
  uint16_t slot = 0;
  RespShard to;
};
std::optional<RespRedirect> ParseRespRedirect(std::string_view text, const RespShard& asked);

// Reads CLUSTER SLOTS from `node` with `ep`'s credentials, in one blocking connection bounded by
// `d` and by ep.connect_timeout. UNAVAILABLE when the node cannot be reached, refuses (e.g.
// cluster support disabled) or reports no slot at all.
Result<RespSlotMap> FetchRespSlotMap(const RespEndpoint& ep, const RespShard& node, Deadline d);

}  // namespace kvtier
