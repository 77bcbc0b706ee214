// Direct metadata calls of a dummy client (dummy_metadata.h).
#include "store/client/dummy_metadata.h"

#include "store/client/master_client.h"

namespace kvtier::store {
namespace {

// After a direct call fails for want of the master, the node is asked for this long.
constexpr std::chrono::seconds kSuspend{5};

const Status& StatusOf(const Status& s) { return s; }
template <typename U>
Status StatusOf(const Result<U>& r) {
  return r.status();
}

template <typename T, typename F>
std::vector<Result<uint64_t>> Values(const std::vector<T>& results, F value_of) {
  std::vector<Result<uint64_t>> out;
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

// The code of a call that failed as a whole for want of the master, or OK.
ErrorCode CallFailure(const std::vector<Result<uint64_t>>& out) {
  if (out.empty() || out[0].ok()) return ErrorCode::OK;
  const ErrorCode c = ErrorCodeOf(out[0].status());
  const bool whole = c == ErrorCode::RPC_FAIL || c == ErrorCode::ILLEGAL_CLIENT ||
                     c == ErrorCode::RPC_TIMEOUT;
  return whole ? c : ErrorCode::OK;
}

}  // namespace

void DummyMetadata::Route(const std::string& master, const std::string& token,
                          std::chrono::milliseconds timeout) {
  std::shared_ptr<MasterApi> next;
  if (!master.empty()) next = ConnectMaster({master, timeout, token});
  std::lock_guard lock(mu_);
  master_ = std::move(next);
  suspended_until_ = {};
}

std::shared_ptr<MasterApi> DummyMetadata::Master() {
  std::lock_guard lock(mu_);
  if (std::chrono::steady_clock::now() < suspended_until_) return nullptr;
  return master_;
}

std::optional<std::vector<Result<uint64_t>>> DummyMetadata::Call(
    dummy::Op op, const std::vector<std::string>& keys, bool force) {
  std::shared_ptr<MasterApi> master = Master();
  if (!master) return std::nullopt;
  std::vector<Result<uint64_t>> out;
  switch (op) {
    case dummy::Op::kExist:
      out =
          Values(master->Exist(keys), [](const Result<bool>& r) { return uint64_t{*r ? 1u : 0u}; });
      break;
    case dummy::Op::kGetSize:
      out = Values(master->GetReplicas(keys), [](const Result<ObjectDesc>& r) { return r->size; });
      break;
    case dummy::Op::kRemove:
      out = Values(master->Remove(keys, force), [](const Status&) { return uint64_t{0}; });
      break;
    default:
      return std::nullopt;
  }
  if (out.size() != keys.size()) return std::nullopt;
  const ErrorCode failed = CallFailure(out);
  if (failed == ErrorCode::OK) return out;
  {
    std::lock_guard lock(mu_);
    suspended_until_ = std::chrono::steady_clock::now() + kSuspend;
  }
  // A timeout is answered as it is (the node waits for the same master, and its own client
  // fails fast once its pings go unanswered), and so is a remove, which the master may have run
  // before the failure. Reads the master refused or could not take go to the node.
  if (failed == ErrorCode::RPC_TIMEOUT || op == dummy::Op::kRemove) return out;
  return std::nullopt;
}

}  // namespace kvtier::store
