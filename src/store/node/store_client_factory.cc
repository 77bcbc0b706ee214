// The store's setup(dict) (store_client_factory.h): key checks, value parsing, and the client it makes.
#include "store/node/store_client_factory.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>

#include "common/etcd_address.h"
#include "common/memfd.h"
#include "common/secret_file.h"

namespace kvtier::store {
namespace {

constexpr std::array<std::string_view, 5> kEmbeddedKeys = {
    "local_hostname", "master_server_addr", "master_server_address", "global_segment_size",
    "auth_token_file"};
constexpr std::array<std::string_view, 2> kDummyKeys = {"server_address", "mem_pool_size"};
constexpr std::array<std::string_view, 7> kCommonKeys = {
    "local_buffer_size", "protocol",          "rpc_timeout_ms",           "tenant_id",
    "enable_ssd_offload", "ipc_socket_path", "enable_client_http_server"};
constexpr std::array<std::string_view, 6> kIgnoredKeys = {
    "metadata_server", "rdma_devices", "device_name", "engine", "ssd_offload_path",
    "client_http_port"};
constexpr uint64_t kMaxRpcTimeoutMs = 24ull * 3600 * 1000;

template <size_t N>
bool In(const std::array<std::string_view, N>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

Status Bad(const std::string& message) {
  return StoreError(ErrorCode::INVALID_PARAMS, "store setup: " + message);
}

// The value as the config spelled it, cut short.
std::string Shown(const nlohmann::json& value) {
  std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

// A non-negative JSON integer (parsed text gives unsigned, code-built JSON may give signed).
std::optional<uint64_t> Whole(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

std::string AllKeys() {
  std::string out;
  auto add = [&out](const auto& keys) {
    for (auto k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
  };
  add(kEmbeddedKeys);
  add(kDummyKeys);
  add(kCommonKeys);
  add(kIgnoredKeys);
  return out;
}

Result<std::string> String(const std::string& key, const nlohmann::json& value) {
  if (!value.is_string()) return Bad(fmt::format("'{}' must be a string, got {}", key, Shown(value)));
  return value.get<std::string>();
}

// A byte count: a non-negative whole number, or a string ParseByteSize reads ("3221225472", "4GB").
Result<uint64_t> Size(const std::string& key, const nlohmann::json& value) {
  if (auto n = Whole(value)) return *n;
  const std::string expected = "a byte size (e.g. 3221225472, \"4GB\", \"512MiB\")";
  if (value.is_string()) {
    auto bytes = ParseByteSize(value.get<std::string>());
    if (!bytes.ok()) {
      return Bad(fmt::format("'{}' must be {}, got {}: {}", key, expected, Shown(value),
                             bytes.status().message()));
    }
    return *bytes;
  }
  return Bad(fmt::format("'{}' must be {}, got {}", key, expected, Shown(value)));
}

Result<bool> Bool(const std::string& key, const nlohmann::json& value) {
  if (!value.is_boolean()) {
    return Bad(fmt::format("'{}' must be true or false, got {}", key, Shown(value)));
  }
  return value.get<bool>();
}

Result<std::chrono::milliseconds> Timeout(const std::string& key, const nlohmann::json& value) {
  uint64_t ms = 0;
  bool ok = false;
  if (auto n = Whole(value)) {
    ms = *n;
    ok = true;
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    ok = !text.empty() && ec == std::errc() && end == text.data() + text.size();
  }
  if (!ok || ms == 0 || ms > kMaxRpcTimeoutMs) {
    return Bad(fmt::format("'{}' must be a whole number of milliseconds from 1 to {}, got {}", key,
                           kMaxRpcTimeoutMs, Shown(value)));
  }
  return std::chrono::milliseconds(ms);
}

// 0..65535 from all-digit text; nullopt otherwise.
std::optional<uint16_t> Port(std::string_view text) {
  uint32_t port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(port);
}

// local_hostname: "host", "host:port" or "[v6]:port" (a bare IPv6 address has no port); no
// port -> 0, a free one. "localhost" is 127.0.0.1: the node binds there and peers dial it.
Status Hostname(std::string text, NodeOptions& node) {
  const size_t first = text.find_first_not_of(" \t");  // Mooncake configs pad it at times
  const size_t last = text.find_last_not_of(" \t");
  text = first == std::string::npos ? "" : text.substr(first, last + 1 - first);
  std::string host = text;
  std::string port;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) {
      return Bad(fmt::format("'local_hostname' \"{}\": '[' without ']'", text));
    }
    host = text.substr(1, close - 1);
    const std::string rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return Bad(fmt::format("'local_hostname' \"{}\": expected ':port' after ']'", text));
    }
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) {
    return Bad(fmt::format(
        "'local_hostname' must be \"host\", \"host:port\" or \"[v6]:port\", got \"{}\" (no host)",
        text));
  }
  const auto p = has_port ? Port(port) : std::optional<uint16_t>(0);
  if (!p) {
    return Bad(fmt::format("'local_hostname' \"{}\": the port must be a number from 0 to 65535",
                           text));
  }
  node.host = host == "localhost" ? "127.0.0.1" : host;
  node.port = *p;
  return Status::Ok();
}

// master_server_addr: the master's "host:port", or the etcd:// address of masters that fail over.
Status MasterAddress(const std::string& key, const std::string& text) {
  if (IsEtcdAddress(text)) {
    auto etcd = ParseEtcdAddress(text);
    if (!etcd.ok()) return Bad(fmt::format("'{}': {}", key, etcd.status().message()));
    return Status::Ok();
  }
  const size_t colon = text.rfind(':');
  const auto port = colon == std::string::npos ? std::nullopt : Port(text.substr(colon + 1));
  if (text.find("://") != std::string::npos || colon == 0 || colon == std::string::npos ||
      !port || *port == 0) {
    return Bad(fmt::format(
        "'{}' must be the master's \"host:port\" or etcd://HOST:PORT[;HOST:PORT][/CLUSTER_ID], "
        "got \"{}\"",
        key, text));
  }
  return Status::Ok();
}

Status Apply(const std::string& key, const nlohmann::json& value, StoreClientConfig& out) {
  if (In(kIgnoredKeys, key)) return Status::Ok();  // Mooncake's transport knobs
  if (key == "protocol") {
    std::string p = value.is_string() ? value.get<std::string>() : "";
    std::transform(p.begin(), p.end(), p.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!value.is_string()) {
      return Bad(fmt::format("'protocol' must be a string such as \"tcp\", got {}", Shown(value)));
    }
    if (p != "tcp") {
      out.notes.push_back(fmt::format(
          "'protocol' {} runs over TCP: the kvtier store moves bytes over TCP only", Shown(value)));
    }
    return Status::Ok();
  }
  if (key == "enable_ssd_offload" || key == "enable_client_http_server") {
    auto on = Bool(key, value);
    if (!on.ok()) return on.status();
    if (*on && key == "enable_ssd_offload") {
      return Bad("'enable_ssd_offload' is not supported (use a kvtier server L2 connector for "
                 "disk tiers)");
    }
    if (*on) {
      out.notes.push_back("'enable_client_http_server' is ignored: run `kvtier node --http-port` "
                          "for a node with metrics");
    }
    return Status::Ok();
  }
  if (key == "rpc_timeout_ms") {
    auto t = Timeout(key, value);
    if (!t.ok()) return t.status();
    out.embedded_options.node.rpc_timeout = *t;
    out.dummy_options.timeout = *t;
    return Status::Ok();
  }
  if (key == "local_buffer_size" || key == "global_segment_size" || key == "mem_pool_size") {
    auto bytes = Size(key, value);
    if (!bytes.ok()) return bytes.status();
    if (key == "local_buffer_size") {
      out.embedded_options.local_buffer_size = *bytes;
      out.dummy_options.local_buffer_size = *bytes;
    } else if (key == "global_segment_size") {
      out.embedded_options.node.segment_size = *bytes;
    } else {
      out.dummy_options.mem_pool_size = *bytes;
    }
    return Status::Ok();
  }
  auto text = String(key, value);
  if (!text.ok()) return text.status();
  if (key == "local_hostname") return Hostname(*text, out.embedded_options.node);
  if (key == "tenant_id") {
    if (!text->empty() && *text != "default") {
      return Bad(fmt::format("'tenant_id' {}: kvtier has no tenants (only \"default\")",
                             Shown(value)));
    }
    return Status::Ok();
  }
  if (key == "ipc_socket_path") {
    out.notes.push_back(
        "ignoring 'ipc_socket_path': a dummy finds its node's socket from 'server_address'");
    return Status::Ok();
  }
  if (key == "auth_token_file") {  // the store's shared secret, as `kvtier node` has it
    auto secret = ReadSecretFile(*text, kMaxSecretBytes);
    if (!secret.ok()) return Bad("'auth_token_file' " + secret.status().message());
    out.embedded_options.node.auth_token = std::move(*secret);
    return Status::Ok();
  }
  if (key == "master_server_addr" || key == "master_server_address") {
    KVT_RETURN_IF_ERROR(MasterAddress(key, *text));
    out.embedded_options.node.master = *text;
    return Status::Ok();
  }
  // server_address
  auto port = DummyNodePort(*text);
  if (!port.ok()) return Bad(port.status().message());
  out.dummy_options.server_address = *text;
  return Status::Ok();
}

}  // namespace

Result<StoreClientConfig> ParseStoreClientConfig(const nlohmann::json& config,
                                                 const ParseRules& rules) {
  if (!config.is_object()) {
    return Bad(fmt::format("the config must be a JSON object of keys ({}), got {}", AllKeys(),
                           Shown(config)));
  }
  StoreClientConfig out;
  auto given = [&config](const char* key) {
    return config.contains(key) && !config.at(key).is_null();
  };
  out.dummy = given("server_address");
  if (rules.require_server_address && !out.dummy) {
    return Bad("'server_address' is required: the \"host:port\" of the `kvtier node` on this host");
  }
  if (rules.require_local_hostname && !out.dummy && !given("local_hostname")) {
    return Bad("'local_hostname' is required: the \"host\" or \"host:port\" this node serves on");
  }
  // The spec's defaults where they differ from the option structs'.
  out.embedded_options.node.master = "127.0.0.1:50051";
  out.embedded_options.node.host = "127.0.0.1";
  out.embedded_options.node.port = 0;
  out.embedded_options.node.segment_size = 16ull << 20;
  out.embedded_options.node.rpc_timeout = std::chrono::milliseconds(5000);
  out.embedded_options.local_buffer_size = 16ull << 20;
  out.dummy_options.mem_pool_size = 0;
  out.dummy_options.local_buffer_size = 16ull << 20;
  out.dummy_options.timeout = std::chrono::milliseconds(5000);
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& key = it.key();
    const bool embedded_key = In(kEmbeddedKeys, key);
    const bool dummy_key = In(kDummyKeys, key);
    const bool known = embedded_key || dummy_key || In(kCommonKeys, key) || In(kIgnoredKeys, key);
    if (known && it.value().is_null()) continue;  // left out: the default
    if (!known) {
      out.notes.push_back(fmt::format("ignoring unknown key '{}' (keys: {})", key, AllKeys()));
      continue;
    }
    if (out.dummy && embedded_key) {
      out.notes.push_back(fmt::format(
          "ignoring '{}': it is for an embedded store (a process with a segment of its own); "
          "with 'server_address' this process is a dummy client of that node",
          key));
      continue;
    }
    if (!out.dummy && dummy_key) {
      out.notes.push_back(fmt::format(
          "ignoring '{}': it is for a dummy client (which also needs 'server_address', the node "
          "on this host); without 'server_address' this process is embedded",
          key));
      continue;
    }
    KVT_RETURN_IF_ERROR(Apply(key, it.value(), out));
  }
  return out;
}

Result<std::unique_ptr<StoreClient>> CreateStoreClient(const StoreClientConfig& config) {
  return config.dummy ? ConnectDummy(config.dummy_options)
                      : StartEmbedded(config.embedded_options);
}

}  // namespace kvtier::store
