// "type":"mem": an in-process map, for tests and benchmarks of the framework itself. Optional
// `delay_ms` makes every backend call that long (bounded by the task's deadline, past which the
// call fails with TIMEOUT), to stand in for a slow backend.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <thread>

#include "connectors/builtin_connectors.h"
#include "connectors/connector_base.h"

namespace kvtier {
namespace {

class MemConnector final : public ConnectorBase<MemConnector> {
 public:
  struct Conn {};  // nothing per thread

  MemConnector(const ConnectorOptions& options, std::chrono::milliseconds delay)
      : ConnectorBase(options), delay_(delay) {
    StartThreads();
  }
  ~MemConnector() override { Close(); }

  Result<std::unique_ptr<Conn>> Connect() { return std::make_unique<Conn>(); }

  Status Get(Conn&, const std::string& key, MutableBuffer dst, Deadline d) {
    KVT_RETURN_IF_ERROR(Delay(d));
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end() || it->second.size() != dst.size) return Status(Code::kNotFound, key);
    std::copy(it->second.begin(), it->second.end(), dst.data);
    return Status::Ok();
  }
  Status Set(Conn&, const std::string& key, ConstBuffer src, Deadline d) {
    KVT_RETURN_IF_ERROR(Delay(d));
    std::vector<uint8_t> value(src.data, src.data + src.size);
    std::lock_guard lock(mu_);
    if (!map_.try_emplace(key, std::move(value)).second) return Status(Code::kAlreadyExists, key);
    return Status::Ok();
  }
  Result<bool> Exists(Conn&, const std::string& key, Deadline d) {
    KVT_RETURN_IF_ERROR(Delay(d));
    std::lock_guard lock(mu_);
    return map_.contains(key);
  }
  Result<bool> Remove(Conn&, const std::string& key, Deadline d) {
    KVT_RETURN_IF_ERROR(Delay(d));
    std::lock_guard lock(mu_);
    return map_.erase(key) > 0;
  }

 private:
  Status Delay(Deadline d) const {
    if (delay_.count() == 0) return Status::Ok();
    const auto wake = std::chrono::steady_clock::now() + delay_;
    std::this_thread::sleep_until(std::min(wake, d));
    return wake > d ? DeadlinePassed() : Status::Ok();
  }

  std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::map<std::string, std::vector<uint8_t>> map_;
};

}  // namespace

ConnectorResult CreateMemConnector(const ConnectorOptions& options, const nlohmann::json& backend) {
  std::chrono::milliseconds delay{0};
  for (const auto& [key, v] : backend.items()) {
    if (key == "delay_ms") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return Status(Code::kInvalidArgument, "delay_ms must be an integer >= 0");
      }
      delay = std::chrono::milliseconds(v.get<int64_t>());
    } else {
      return Status(Code::kInvalidArgument, fmt::format("unknown key '{}' for type mem", key));
    }
  }
  return std::unique_ptr<Connector>(std::make_unique<MemConnector>(options, delay));
}

}  // namespace kvtier
