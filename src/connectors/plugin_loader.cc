// "type":"plugin": loads a connector from a shared library (plugin_abi.h). The library stays
// loaded for as long as its connector lives.
#include <dlfcn.h>
#include <fmt/format.h>

#include "common/logging.h"
#include "connectors/builtin_connectors.h"
#include "connectors/plugin_abi.h"

namespace kvtier {
namespace {

// Owns the plugin's connector and the library handle; forwards every call.
class PluginConnector final : public Connector {
 public:
  PluginConnector(void* handle, const KvtierConnectorPlugin* plugin, Connector* inner)
      : handle_(handle), plugin_(plugin), inner_(inner) {}
  ~PluginConnector() override {
    inner_->Close();  // the plugin's threads stop before its code can be unloaded
    plugin_->destroy(inner_);
    ::dlclose(handle_);
  }

  const ConnectorOptions& Options() const override { return inner_->Options(); }
  TaskId SubmitLookup(std::vector<std::string> keys) override {
    return inner_->SubmitLookup(std::move(keys));
  }
  std::optional<Completion> LookupNow(std::vector<std::string> keys) override {
    return inner_->LookupNow(std::move(keys));
  }
  void Unlock(std::span<const std::string> keys) override { inner_->Unlock(keys); }
  TaskId SubmitLoad(std::vector<std::string> keys, std::vector<MutableBuffer> dst) override {
    return inner_->SubmitLoad(std::move(keys), std::move(dst));
  }
  TaskId SubmitWrite(std::vector<std::string> keys, std::vector<ConstBuffer> src) override {
    return inner_->SubmitWrite(std::move(keys), std::move(src));
  }
  TaskId SubmitRemove(std::vector<std::string> keys) override {
    return inner_->SubmitRemove(std::move(keys));
  }
  int EventFd(ConnectorOp op) const override { return inner_->EventFd(op); }
  std::vector<Completion> Drain(ConnectorOp op) override { return inner_->Drain(op); }
  ConnectorStats Stats() const override { return inner_->Stats(); }
  bool Locked(const std::string& key) const override { return inner_->Locked(key); }
  Result<std::vector<StoredObject>> ListStored() override { return inner_->ListStored(); }
  void Close() override { inner_->Close(); }

 private:
  void* handle_;
  const KvtierConnectorPlugin* plugin_;
  Connector* inner_;
};

}  // namespace

ConnectorResult LoadPluginConnector(const ConnectorOptions& options, const nlohmann::json& backend) {
  auto it = backend.find("path");
  if (it == backend.end() || !it->is_string()) {
    return Status(Code::kInvalidArgument, "type plugin needs \"path\": \"/abs/path/libx.so\"");
  }
  const std::string path = it->get<std::string>();
  if (path.empty() || path[0] != '/') {
    return Status(Code::kInvalidArgument,
                  fmt::format("plugin path must be absolute, got '{}'", path));
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Status(Code::kNotFound, fmt::format("cannot load plugin: {}", ::dlerror()));
  }
  auto fail = [handle](Code code, std::string msg) {
    ::dlclose(handle);
    return Status(code, std::move(msg));
  };
  auto entry = reinterpret_cast<KvtierConnectorPluginEntry>(
      ::dlsym(handle, KVTIER_CONNECTOR_PLUGIN_SYMBOL));
  if (entry == nullptr) {
    return fail(Code::kNotFound, fmt::format("{} does not export {}() (is it a kvtier plugin?)",
                                             path, KVTIER_CONNECTOR_PLUGIN_SYMBOL));
  }
  const KvtierConnectorPlugin* plugin = entry();
  if (plugin == nullptr) return fail(Code::kInvalidArgument, path + ": entry point returned null");
  if (plugin->abi_version != KVTIER_CONNECTOR_ABI_VERSION) {
    return fail(Code::kVersionMismatch,
                fmt::format("{} was built for connector ABI version {}, this kvtier has version {}; "
                            "rebuild it against this kvtier's headers",
                            path, plugin->abi_version, KVTIER_CONNECTOR_ABI_VERSION));
  }
  if (plugin->create == nullptr || plugin->destroy == nullptr) {
    return fail(Code::kInvalidArgument, path + ": descriptor lacks create/destroy");
  }
  char err[512] = {0};
  const std::string json = backend.dump();
  Connector* inner = plugin->create(&options, json.c_str(), err, sizeof(err));
  if (inner == nullptr) {
    err[sizeof(err) - 1] = '\0';
    return fail(Code::kInvalidArgument,
                fmt::format("plugin {} refused its config: {}", path, err[0] ? err : "no reason"));
  }
  KVT_LOG_INFO("{}: loaded plugin '{}' from {}", options.name,
               plugin->name ? plugin->name : "?", path);
  return std::unique_ptr<Connector>(std::make_unique<PluginConnector>(handle, plugin, inner));
}

}  // namespace kvtier
