// Direct metadata calls of a dummy client (dummy_metadata.h).
#include "store/client/dummy_metadata.h"

#include "store/client/master_client.h"

namespace kvtier::store {
namespace {

// Whether a whole call failed for want of the master itself (not a per-key answer).
bool Unreachable(const StoreStatus& s) {
  return s.code() == ErrorCode::RPC_FAIL || s.code() == ErrorCode::ILLEGAL_CLIENT;
}

const StoreStatus& StatusOf(const StoreStatus& s) { return s; }
template <typename U>
StoreStatus StatusOf(const StoreResult<U>& r) {
  return r.status();
}

template <typename T, typename F>
std::optional<std::vector<StoreResult<uint64_t>>> Values(const std::vector<T>& results,
                                                         size_t keys, F value_of) {
  if (results.size() != keys) return std::nullopt;
  if (!results.empty() && !results[0].ok() && Unreachable(StatusOf(results[0]))) {
    return std::nullopt;
  }
  std::vector<StoreResult<uint64_t>> out;
  out.reserve(results.size());
  for (const auto& r : results) {
    if (r.ok()) {
      out.emplace_back(value_of(r));
    } else {
      out.emplace_back(StatusOf(r));
    }
  }
  return out;
}

}  // namespace

void DummyMetadata::Route(const std::string& master, const std::string& token,
                          std::chrono::milliseconds timeout) {
  std::shared_ptr<MasterApi> next;
  if (!master.empty()) next = ConnectMaster({master, timeout, token});
  std::lock_guard lock(mu_);
  master_ = std::move(next);
}

std::shared_ptr<MasterApi> DummyMetadata::Master() {
  std::lock_guard lock(mu_);
  return master_;
}

std::optional<std::vector<StoreResult<uint64_t>>> DummyMetadata::Call(
    dummy::Op op, const std::vector<std::string>& keys, bool force) {
  std::shared_ptr<MasterApi> master = Master();
  if (!master) return std::nullopt;
  std::optional<std::vector<StoreResult<uint64_t>>> out;
  switch (op) {
    case dummy::Op::kExist:
      out = Values(master->Exist(keys), keys.size(),
                   [](const StoreResult<bool>& r) { return uint64_t{*r ? 1u : 0u}; });
      break;
    case dummy::Op::kGetSize:
      out = Values(master->GetReplicas(keys), keys.size(),
                   [](const StoreResult<ObjectDesc>& r) { return r->size; });
      break;
    case dummy::Op::kRemove:
      out = Values(master->Remove(keys, force), keys.size(),
                   [](const StoreStatus&) { return uint64_t{0}; });
      break;
    default:
      return std::nullopt;
  }
  if (!out) {
    std::lock_guard lock(mu_);
    if (master_ == master) master_.reset();
  }
  return out;
}

}  // namespace kvtier::store
