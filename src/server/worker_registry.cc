#include "server/worker_registry.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "common/logging.h"

namespace kvtier {

uint64_t WorkerRegistry::AddPending(std::vector<MappedFile> buffers, pid_t owner_pid) {
  // Opened now, while the owner waits for our reply: the pid cannot have been reused yet.
  // (The syscall itself: glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage.)
  wire::UniqueFd owner(owner_pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, owner_pid, 0))
                                     : -1);
  if (owner_pid > 0 && !owner.valid() && ShouldLog("pidfd_open")) {
    KVT_LOG_WARN("cannot watch worker process {} (pidfd_open: {}): its registrations are not "
                 "reaped if it dies", owner_pid, std::strerror(errno));
  }
  std::lock_guard lock(mu_);
  DropExpiredPendingLocked();
  // Tokens are not guessable from a counter alone, so one local user cannot easily claim
  // another's buffers by racing REGISTER with small integers.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t token = (rng() & ~0xffffULL) | (next_token_++ & 0xffff);
  pending_[token] = Pending{std::move(buffers), clock_.NowNs(), owner_pid, std::move(owner)};
  return token;
}

void WorkerRegistry::DropExpiredPendingLocked() {
  const int64_t now = clock_.NowNs();
  const int64_t ttl_ns = std::chrono::nanoseconds(pending_ttl_).count();
  std::erase_if(pending_, [&](const auto& kv) { return now - kv.second.created_ns > ttl_ns; });
}

void WorkerRegistry::DropExpiredPending() {
  std::lock_guard lock(mu_);
  DropExpiredPendingLocked();
}

Status WorkerRegistry::Register(const wire::RegisterRequest& req, uint32_t chunk_size) {
  if (req.model.empty() || req.model.find('@') != std::string::npos) {
    return Status(Code::kInvalidArgument, "model must be non-empty and must not contain '@'");
  }
  if (req.world_size == 0 || req.world_size > 255 || req.rank >= req.world_size) {
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} / world_size {} out of range", req.rank, req.world_size));
  }
  auto w = std::make_shared<RegisteredWorker>();
  wire::UniqueFd owner;
  {
    std::lock_guard lock(mu_);
    DropExpiredPendingLocked();
    auto it = pending_.find(req.fd_token);
    if (it == pending_.end()) {
      return Status(Code::kNotFound, "unknown or expired fd_token: hand the buffers over first");
    }
    const bool gpu = !req.gpu_buffers.empty();
    if (gpu && !it->second.buffers.empty()) {
      return Status(Code::kInvalidArgument,
                    "a GPU registration takes no memfds: hand off no fds for its token");
    }
    std::vector<uint64_t> sizes;
    for (const auto& b : it->second.buffers) sizes.push_back(b.size());
    for (const auto& b : req.gpu_buffers) sizes.push_back(b.size);
    KVT_RETURN_IF_ERROR(req.layout.Validate(sizes, chunk_size));
    w->buffers = std::move(it->second.buffers);
    w->owner_pid = it->second.owner.valid() ? it->second.owner_pid : 0;
    owner = std::move(it->second.owner);
    pending_.erase(it);
  }
  if (!req.gpu_buffers.empty()) {
    std::vector<cuda::IpcMemory::Export> exports;
    for (const auto& b : req.gpu_buffers) {
      exports.push_back({b.handle, b.offset, b.size, req.gpu_device});
    }
    auto gpu = cuda::IpcMemory::Open(exports, req.gpu_event);
    if (!gpu.ok()) return gpu.status();
    w->gpu = std::move(gpu).value();
  }
  w->instance_id = req.instance_id;
  w->model = req.model;
  w->world_size = req.world_size;
  w->rank = req.rank;
  w->layout = req.layout;
  // Fault the worker's pages into our mapping now (outside the lock: it takes a while), so the
  // first STORE/RETRIEVE copies at memory speed instead of paying a fault per page.
  for (auto& b : w->buffers) b.PopulateForWrite();
  std::lock_guard lock(mu_);
  workers_[req.instance_id] = Entry{std::move(w), std::move(owner)};
  return Status::Ok();
}

Status WorkerRegistry::Unregister(uint64_t instance_id) {
  std::lock_guard lock(mu_);
  if (workers_.erase(instance_id) == 0) {
    return Status(Code::kNotRegistered, fmt::format("instance {} is not registered", instance_id));
  }
  return Status::Ok();
}

Result<std::shared_ptr<const RegisteredWorker>> WorkerRegistry::Get(uint64_t instance_id) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(instance_id);
  if (it == workers_.end()) {
    return Status(Code::kNotRegistered,
                  fmt::format("instance {} has no registered KV buffers", instance_id));
  }
  return it->second.worker;
}

size_t WorkerRegistry::Count() const {
  std::lock_guard lock(mu_);
  return workers_.size();
}

std::vector<std::shared_ptr<const RegisteredWorker>> WorkerRegistry::List() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const RegisteredWorker>> out;
  out.reserve(workers_.size());
  for (const auto& [id, entry] : workers_) out.push_back(entry.worker);
  return out;
}

size_t WorkerRegistry::PendingCount() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

std::optional<uint64_t> WorkerRegistry::ObjectBytes(const std::string& model, uint32_t world_size,
                                                    uint32_t rank, uint32_t chunk_size) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : workers_) {
    const RegisteredWorker& w = *e.worker;
    if (w.model == model && w.world_size == world_size && w.rank == rank) {
      return w.layout.ObjectBytes(chunk_size);
    }
  }
  return std::nullopt;
}

std::vector<std::shared_ptr<const RegisteredWorker>> WorkerRegistry::ReapExited() {
  std::vector<std::shared_ptr<const RegisteredWorker>> reaped;
  std::lock_guard lock(mu_);
  std::erase_if(workers_, [&reaped](const auto& kv) {
    const Entry& e = kv.second;
    if (!e.owner.valid()) return false;
    pollfd pfd{e.owner.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) != 1) return false;  // a pidfd turns readable when its process exits
    reaped.push_back(e.worker);
    return true;
  });
  return reaped;
}

}  // namespace kvtier
