// The slot map is read with hiredis, in a short blocking connection: CLUSTER SLOTS is a nested
// array, which the data path's one-line reply reader (resp_reply_reader.h) does not parse, and a
// map read is rare (startup, a MOVED, a lost primary), so its copies do not matter.
#include "connectors/resp_slots.h"

#include "connectors/resp_hiredis.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <memory>

namespace kvtier {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The table-driven form of CRC16/XMODEM: one entry per byte value.
constexpr std::array<uint16_t, 256> MakeCrcTable() {
  std::array<uint16_t, 256> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint16_t crc = static_cast<uint16_t>(b << 8);
    for (int i = 0; i < 8; ++i) {
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    t[b] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrcTable = MakeCrcTable();

bool ParsePort(std::string_view s, uint16_t& port) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

// A node entry of CLUSTER SLOTS: [ip, port, id, ...]. An empty ip means "the address you asked";
// "?" an unknown endpoint (nullopt).
std::optional<RespShard> NodeOf(const redisReply* r, const RespShard& asked) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER ||
      r->element[1]->integer < 1 || r->element[1]->integer > 65535) {
    return std::nullopt;
  }
  std::string host(r->element[0]->str, r->element[0]->len);
  if (host == "?") return std::nullopt;
  if (host.empty()) host = asked.host;
  return RespShard{std::move(host), static_cast<uint16_t>(r->element[1]->integer)};
}

size_t IndexOf(std::vector<RespShard>& nodes, RespShard n) {
  auto it = std::find(nodes.begin(), nodes.end(), n);
  if (it != nodes.end()) return static_cast<size_t>(it - nodes.begin());
  nodes.push_back(std::move(n));
  return nodes.size() - 1;
}

// [[start, end, primary, replica...], ...] -> map. False when the reply does not have that shape.
bool ParseSlots(const redisReply* r, const RespShard& asked, RespSlotMap& map) {
  if (r->type != REDIS_REPLY_ARRAY) return false;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* range = r->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER) {
      return false;
    }
    const long long lo = range->element[0]->integer, hi = range->element[1]->integer;
    if (lo < 0 || hi < lo || hi >= static_cast<long long>(kRespClusterSlots)) return false;
    std::optional<RespShard> primary = NodeOf(range->element[2], asked);
    for (size_t j = 3; j < range->elements; ++j) {
      if (auto rep = NodeOf(range->element[j], asked)) IndexOf(map.replicas, std::move(*rep));
    }
    if (!primary) continue;  // endpoint unknown: those slots stay without an owner
    const auto m = static_cast<int16_t>(IndexOf(map.primaries, std::move(*primary)));
    std::fill(map.owner.begin() + lo, map.owner.begin() + hi + 1, m);
  }
  return true;
}

}  // namespace

uint16_t RespCrc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrcTable[((crc >> 8) ^ c) & 0xFF]);
  }
  return crc;
}

uint16_t RespKeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return RespCrc16(key) & (kRespClusterSlots - 1);
}

std::string RespShard::Text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::optional<RespShard> ParseRespShard(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  RespShard n{std::string(host), 0};
  if (!ParsePort(text.substr(colon + 1), n.port)) return std::nullopt;
  return n;
}

std::optional<RespRedirect> ParseRespRedirect(std::string_view text, const RespShard& asked) {
  RespRedirect r;
  if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    r.ask = true;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  uint32_t slot = 0;
  const std::string_view num = text.substr(0, space);
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), slot);
  if (ec != std::errc() || p != num.data() + num.size() || slot >= kRespClusterSlots) {
    return std::nullopt;
  }
  r.slot = static_cast<uint16_t>(slot);
  // The address is ip:port without brackets even for IPv6: the port follows the last ':'.
  const std::string_view addr = text.substr(space + 1);
  const size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || !ParsePort(addr.substr(colon + 1), r.to.port)) {
    return std::nullopt;
  }
  r.to.host = colon == 0 ? asked.host : std::string(addr.substr(0, colon));
  return r;
}

Result<RespSlotMap> FetchRespSlotMap(const RespEndpoint& ep, const RespShard& node, Deadline d) {
  const std::string name = fmt::format("resp {}", node.Text());
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - SteadyClock::now());
  const auto limit = std::min(left, ep.connect_timeout);
  if (limit.count() <= 0) return Status(Code::kTimeout, name + ": CLUSTER SLOTS: deadline passed");
  RespEndpoint at = ep;
  at.host = node.host;
  at.port = node.port;
  // One limit for the whole exchange: the commands' reads are bounded by what is left of it.
  auto c = RedisOpen(at, name, limit, /*bound_commands=*/true);
  if (!c.ok()) return c.status();
  RedisReply r = RedisCall(c->get(), {"CLUSTER", "SLOTS"});
  RespSlotMap map;
  map.source = node.Text();
  if (!r || !ParseSlots(r.get(), node, map)) {
    return RedisFailed(name, "CLUSTER SLOTS", c->get(), r.get());
  }
  if (map.primaries.empty()) {
    return Status(Code::kUnavailable, name + ": CLUSTER SLOTS: no slot is served by any node");
  }
  return map;
}

}  // namespace kvtier
