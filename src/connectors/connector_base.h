// ConnectorBase<Derived>: everything generic about an L2 connector, so that a backend only says
// how to move one key over one connection. The base owns
//  - the op pools: one thread pool per operation kind named in per_op_threads, and a shared
//    pool of num_threads threads for the kinds not named; each pool has one connection per
//    thread, opened when the thread starts (a failed one again when a tile next takes it), and
//    a thread takes an idle one for each tile;
//    dedicated write and remove pools run at a lower CPU priority (common/thread_priority.h), so
//    that on a saturated host lookups and loads get a core first;
//  - LookupNow: a lookup run on the caller's thread over an idle connection of the pool that
//    serves lookups (none idle: nullopt), so that a caller who would only wait saves the
//    hand-offs to a pool thread and back (~3 thread wake-ups);
//  - batch splitting: a batch becomes up to `threads` tiles that run in parallel, and the last
//    tile to finish completes the task (exactly once);
//  - deadlines: a tile that starts after the task's deadline fails without asking the backend,
//    and the per-key loops stop at the deadline; backends get the deadline to bound their I/O;
//  - lookup locks: keys found by a lookup are locked (remove skips them) until Unlock;
//  - completion queues, one eventfd per operation kind, and counters.
//
// Derived (CRTP, resolved at compile time) provides, for its connection type C:
//   Result<std::unique_ptr<C>> Connect();  // per pool thread; retried on the next tile after a
//                                          // failure
//   Status Get(C&, const std::string& key, MutableBuffer dst, Deadline);  // NOT_FOUND = miss
//   Status Set(C&, const std::string& key, ConstBuffer src, Deadline);    // ALREADY_EXISTS = kept
//   Result<bool> Exists(C&, const std::string& key, Deadline);
//   Result<bool> Remove(C&, const std::string& key, Deadline);
// and may hide BatchGet/BatchSet/BatchExists/BatchRemove (a backend with batch commands) and
// TilesFor (e.g. 1 to keep a batch on one connection). A per-key NOT_FOUND is a miss; any other
// error fails the rest of the tile. Derived calls StartThreads() at the end of its constructor
// and Close() first thing in its destructor (the pool threads call into Derived).
//
// Header-only on purpose: plugins build against the installed headers and nothing else.
// Thread-safety: as connector.h says. Derived's per-key calls run on the pool threads, each with
// its own connection; only state Derived shares between connections needs a lock.
#pragma once

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/thread_priority.h"
#include "connectors/connector.h"

namespace kvtier {

template <class Derived>
class ConnectorBase : public Connector {
 public:
  explicit ConnectorBase(ConnectorOptions options) : options_(std::move(options)) {
    for (size_t i = 0; i < kConnectorOps; ++i) efd_[i] = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~ConnectorBase() override {
    Close();
    for (int fd : efd_) {
      if (fd >= 0) ::close(fd);
    }
  }
  ConnectorBase(const ConnectorBase&) = delete;
  ConnectorBase& operator=(const ConnectorBase&) = delete;

  const ConnectorOptions& Options() const final { return options_; }

  TaskId SubmitLookup(std::vector<std::string> keys) final {
    auto b = NewBatch(ConnectorOp::kLookup, std::move(keys));
    return Submit(std::move(b));
  }
  std::optional<Completion> LookupNow(std::vector<std::string> keys) final {
    OpPool* pool = pool_for_[Idx(ConnectorOp::kLookup)].get();
    if (pool == nullptr || keys.empty()) return std::nullopt;
    std::shared_ptr<void> conn;
    {
      std::lock_guard lock(pool->mu);
      auto it = std::find_if(pool->idle.begin(), pool->idle.end(),
                             [](const std::shared_ptr<void>& c) { return c != nullptr; });
      if (pool->stop || it == pool->idle.end()) return std::nullopt;
      conn = std::move(*it);
      pool->idle.erase(it);
    }
    auto b = NewBatch(ConnectorOp::kLookup, std::move(keys));
    b->first_error = RunTile(*As(conn.get()), *b, 0, b->keys.size());
    bool wake = false;
    {
      std::lock_guard lock(pool->mu);
      if (!pool->stop) pool->idle.push_back(std::move(conn));
      wake = !pool->q.empty();  // a tile may be waiting for this connection
    }
    if (wake) pool->cv.notify_one();
    return Finish(*b);
  }
  void Unlock(std::span<const std::string> keys) final {
    std::lock_guard lock(lock_mu_);
    for (const auto& k : keys) {
      auto it = locks_.find(k);
      if (it != locks_.end() && --it->second == 0) locks_.erase(it);
    }
  }
  TaskId SubmitLoad(std::vector<std::string> keys, std::vector<MutableBuffer> dst) final {
    auto b = NewBatch(ConnectorOp::kLoad, std::move(keys));
    if (dst.size() != b->keys.size()) return Reject(std::move(b), "one buffer per key needed");
    for (const auto& d : dst) b->inflight += d.size;
    b->dst = std::move(dst);
    return Submit(std::move(b));
  }
  TaskId SubmitWrite(std::vector<std::string> keys, std::vector<ConstBuffer> src) final {
    auto b = NewBatch(ConnectorOp::kWrite, std::move(keys));
    if (src.size() != b->keys.size()) return Reject(std::move(b), "one buffer per key needed");
    for (const auto& s : src) b->inflight += s.size;
    b->src = std::move(src);
    return Submit(std::move(b));
  }
  TaskId SubmitRemove(std::vector<std::string> keys) final {
    return Submit(NewBatch(ConnectorOp::kRemove, std::move(keys)));
  }

  int EventFd(ConnectorOp op) const final { return efd_[Idx(op)]; }

  std::vector<Completion> Drain(ConnectorOp op) final {
    const size_t i = Idx(op);
    // Order matters: empty the eventfd, then clear the flag, then take the queue. A completion
    // pushed after the flag is cleared writes the eventfd again, so none is left unsignalled.
    uint64_t v;
    while (::read(efd_[i], &v, sizeof(v)) == sizeof(v)) {
    }
    signaled_[i].store(false);
    std::vector<Completion> out;
    std::lock_guard lock(cq_mu_[i]);
    out.swap(cq_[i]);
    return out;
  }

  ConnectorStats Stats() const final {
    ConnectorStats s;
    for (size_t i = 0; i < kConnectorOps; ++i) {
      s.ops[i].tasks = counters_[i].tasks.load();
      s.ops[i].failed_tasks = counters_[i].failed_tasks.load();
      s.ops[i].keys = counters_[i].keys.load();
      s.ops[i].hits = counters_[i].hits.load();
      s.ops[i].bytes = counters_[i].bytes.load();
    }
    s.inflight_bytes = inflight_bytes_.load();
    std::lock_guard lock(lock_mu_);
    s.locked_keys = locks_.size();
    return s;
  }

  // A backend that evicts on its own should spare locked keys too.
  bool Locked(const std::string& key) const final {
    std::lock_guard lock(lock_mu_);
    return locks_.contains(key);
  }

  void Close() final {
    std::vector<Tile> orphans;
    for (auto& pool : pools_) {
      std::lock_guard lock(pool->mu);
      pool->stop = true;
      std::move(pool->q.begin(), pool->q.end(), std::back_inserter(orphans));
      pool->q.clear();
      pool->cv.notify_all();
    }
    for (auto& pool : pools_) {
      for (auto& t : pool->threads) {
        if (t.joinable()) t.join();
      }
      std::vector<std::shared_ptr<void>> conns;  // closed here, while Derived is still whole
      std::lock_guard lock(pool->mu);
      conns.swap(pool->idle);
    }
    for (auto& t : orphans) FinishTile(t, Status(Code::kUnavailable, Closed()));
  }

 protected:
  // Starts the op pools. Call at the end of Derived's constructor.
  void StartThreads() {
    std::shared_ptr<OpPool> shared;
    for (ConnectorOp op : kAllConnectorOps) {
      const uint32_t n = options_.per_op_threads[Idx(op)];
      if (n > 0) {
        pool_for_[Idx(op)] = StartPool(OpPoolName(op), n, op);
      } else {
        if (!shared) {
          shared = StartPool("shared", std::max<uint32_t>(1, options_.num_threads), std::nullopt);
        }
        pool_for_[Idx(op)] = shared;
      }
    }
  }

  // Default tiling: as many tiles as the pool has threads (a backend may override).
  size_t TilesFor(ConnectorOp, size_t keys, size_t threads) const {
    return std::min(keys, threads);
  }

  // Default batch calls: one key at a time over the connection.
  template <class C>
  Status BatchExists(C& c, std::span<const std::string> keys, Deadline d, std::span<uint8_t> out) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::chrono::steady_clock::now() >= d) return DeadlinePassed();
      Result<bool> r = self().Exists(c, keys[i], d);
      if (!r.ok()) return r.status();
      out[i] = *r ? 1 : 0;
    }
    return Status::Ok();
  }
  template <class C>
  Status BatchGet(C& c, std::span<const std::string> keys, std::span<const MutableBuffer> dst,
                  Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::chrono::steady_clock::now() >= d) return DeadlinePassed();
      Status s = self().Get(c, keys[i], dst[i], d);
      if (s.ok()) {
        out[i] = 1;
        bytes += dst[i].size;
      } else if (s.code() != Code::kNotFound) {
        return s;
      }
    }
    return Status::Ok();
  }
  template <class C>
  Status BatchSet(C& c, std::span<const std::string> keys, std::span<const ConstBuffer> src,
                  Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::chrono::steady_clock::now() >= d) return DeadlinePassed();
      Status s = self().Set(c, keys[i], src[i], d);
      if (s.ok()) {
        bytes += src[i].size;
      } else if (s.code() != Code::kAlreadyExists) {
        return s;
      }
      out[i] = 1;
    }
    return Status::Ok();
  }
  template <class C>
  Status BatchRemove(C& c, std::span<const std::string> keys, Deadline d, std::span<uint8_t> out) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (std::chrono::steady_clock::now() >= d) return DeadlinePassed();
      Result<bool> r = self().Remove(c, keys[i], d);
      if (!r.ok()) return r.status();
      out[i] = *r ? 1 : 0;
    }
    return Status::Ok();
  }

  static Status DeadlinePassed() { return Status(Code::kTimeout, "deadline passed"); }

  // The operation whose dedicated pool the calling thread serves (e.g. in Connect(), to set up
  // its connection for it); nullopt in the shared pool and outside the connector's threads.
  static std::optional<ConnectorOp> ThreadOp() { return thread_op_; }
  // Operations whose dedicated pool runs at the bulk priority.
  static bool IsBulkOp(ConnectorOp op) {
    return op == ConnectorOp::kWrite || op == ConnectorOp::kRemove;
  }

 private:
  struct Batch {
    TaskId id = 0;
    ConnectorOp op = ConnectorOp::kLookup;
    std::vector<std::string> keys;
    std::vector<MutableBuffer> dst;
    std::vector<ConstBuffer> src;
    std::vector<uint8_t> results;
    std::chrono::steady_clock::time_point start;
    Deadline deadline;
    uint64_t inflight = 0;
    std::atomic<size_t> remaining{0};
    std::atomic<uint64_t> bytes{0};
    std::mutex mu;
    Status first_error;  // guarded by mu
  };
  struct Tile {
    std::shared_ptr<Batch> batch;
    size_t begin = 0, end = 0;
  };
  struct OpPool {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Tile> q;
    bool stop = false;
    std::vector<std::thread> threads;
    // Derived's connections that no tile or caller is using (null: a connect that failed).
    // Type-erased because Derived is incomplete where this struct is defined.
    std::vector<std::shared_ptr<void>> idle;
  };
  struct AtomicCounters {
    std::atomic<uint64_t> tasks{0}, failed_tasks{0}, keys{0}, hits{0}, bytes{0};
  };

  Derived& self() { return static_cast<Derived&>(*this); }
  static size_t Idx(ConnectorOp op) { return static_cast<size_t>(op); }
  std::string Closed() const { return options_.name + ": connector closed"; }

  std::shared_ptr<Batch> NewBatch(ConnectorOp op, std::vector<std::string> keys) {
    auto b = std::make_shared<Batch>();
    b->id = next_id_.fetch_add(1);
    b->op = op;
    b->keys = std::move(keys);
    b->results.assign(b->keys.size(), 0);
    b->start = std::chrono::steady_clock::now();
    b->deadline = b->start + options_.deadline;
    return b;
  }

  TaskId Reject(std::shared_ptr<Batch> b, const char* why) {
    b->first_error = Status(Code::kInvalidArgument, why);
    Complete(*b);
    return b->id;
  }

  TaskId Submit(std::shared_ptr<Batch> b) {
    const TaskId id = b->id;
    const size_t n = b->keys.size();
    OpPool* pool = pool_for_[Idx(b->op)].get();
    if (n == 0 || pool == nullptr) {
      if (pool == nullptr) b->first_error = Status(Code::kUnavailable, Closed());
      Complete(*b);
      return id;
    }
    const size_t tiles =
        std::clamp<size_t>(self().TilesFor(b->op, n, pool->threads.size()), 1, n);
    const size_t per = (n + tiles - 1) / tiles;
    const size_t count = (n + per - 1) / per;
    b->remaining.store(count);
    inflight_bytes_.fetch_add(b->inflight);
    {
      std::lock_guard lock(pool->mu);
      if (pool->stop) {
        inflight_bytes_.fetch_sub(b->inflight);
        b->first_error = Status(Code::kUnavailable, Closed());
        b->inflight = 0;
        Complete(*b);
        return id;
      }
      for (size_t begin = 0; begin < n; begin += per) {
        pool->q.push_back(Tile{b, begin, std::min(n, begin + per)});
      }
    }
    if (count == 1) {
      pool->cv.notify_one();
    } else {
      pool->cv.notify_all();
    }
    return id;
  }

  std::shared_ptr<OpPool> StartPool(const std::string& pool_name, uint32_t threads,
                                    std::optional<ConnectorOp> op) {
    auto pool = std::make_shared<OpPool>();
    pools_.push_back(pool);
    for (uint32_t i = 0; i < threads; ++i) {
      pool->threads.emplace_back([this, l = pool.get(), pool_name, op] {
        const std::string tname = (options_.type + "-" + pool_name).substr(0, 15);
        pthread_setname_np(pthread_self(), tname.c_str());
        thread_op_ = op;
        ThreadLoop(*l, op && IsBulkOp(*op));
      });
    }
    return pool;
  }

  // Connects at once, so that a backend's setup (e.g. mapping and prefaulting buffers) is paid
  // before the first task's deadline starts, and at normal priority; a bulk pool's thread then
  // drops to the bulk priority. A failed connect is retried by the next tile that takes it.
  void ThreadLoop(OpPool& pool, bool bulk) {
    Status connect_error;
    std::shared_ptr<void> conn = ConnectShared(connect_error);
    if (bulk) (void)MakeBulkThread();
    for (;;) {
      Tile t;
      {
        std::unique_lock lock(pool.mu);
        pool.idle.push_back(std::move(conn));  // between tiles a LookupNow may borrow it
        pool.cv.wait(lock, [&] { return pool.stop || (!pool.q.empty() && !pool.idle.empty()); });
        if (pool.stop) return;
        t = std::move(pool.q.front());
        pool.q.pop_front();
        conn = std::move(pool.idle.back());
        pool.idle.pop_back();
      }
      Status s;
      if (std::chrono::steady_clock::now() >= t.batch->deadline) {
        s = Status(Code::kTimeout, options_.name + ": deadline passed before the backend was asked");
      } else {
        if (!conn) conn = ConnectShared(connect_error);
        s = conn ? RunTile(*As(conn.get()), *t.batch, t.begin, t.end) : connect_error;
      }
      FinishTile(t, std::move(s));
    }
  }

  // Derived's connection type, from its Connect().
  template <class D = Derived>
  static auto* As(void* conn) {
    using ConnPtr = std::remove_cvref_t<decltype(*std::declval<D&>().Connect())>;
    return static_cast<typename ConnPtr::element_type*>(conn);
  }

  // A new connection, or null with the reason in `error`.
  std::shared_ptr<void> ConnectShared(Status& error) {
    auto conn = ConnectGuarded();
    if (!conn.ok()) {
      error = conn.status();
      return nullptr;
    }
    return std::shared_ptr<void>(std::move(*conn));
  }

  // A backend's Connect() that throws is a failed connection, not a dead process.
  template <class D = Derived>
  auto ConnectGuarded() -> decltype(std::declval<D&>().Connect()) {
    try {
      return static_cast<D&>(*this).Connect();
    } catch (const std::exception& e) {
      return Status(Code::kUnavailable, options_.name + ": connect threw: " + e.what());
    } catch (...) {
      return Status(Code::kUnavailable, options_.name + ": connect threw");
    }
  }

  // Calls the backend for keys [begin, end) of the batch. Exceptions stop at this boundary.
  template <class C>
  Status RunTile(C& c, Batch& b, size_t begin, size_t end) {
    const size_t n = end - begin;
    std::span<const std::string> keys(b.keys.data() + begin, n);
    std::span<uint8_t> out(b.results.data() + begin, n);
    try {
      switch (b.op) {
        case ConnectorOp::kLookup: {
          Status s = self().BatchExists(c, keys, b.deadline, out);
          std::lock_guard lock(lock_mu_);
          for (size_t i = 0; i < n; ++i) {
            if (out[i]) ++locks_[keys[i]];
          }
          return s;
        }
        case ConnectorOp::kLoad: {
          uint64_t bytes = 0;
          Status s = self().BatchGet(c, keys, std::span<const MutableBuffer>(b.dst).subspan(begin, n),
                                     b.deadline, out, bytes);
          b.bytes.fetch_add(bytes);
          return s;
        }
        case ConnectorOp::kWrite: {
          uint64_t bytes = 0;
          Status s = self().BatchSet(c, keys, std::span<const ConstBuffer>(b.src).subspan(begin, n),
                                     b.deadline, out, bytes);
          b.bytes.fetch_add(bytes);
          return s;
        }
        case ConnectorOp::kRemove:
          return RemoveUnlocked(c, keys, b.deadline, out);
      }
      return Status(Code::kInternal, "unknown connector op");
    } catch (const std::exception& e) {
      return Status(Code::kInternal, options_.name + ": backend threw: " + e.what());
    } catch (...) {
      return Status(Code::kInternal, options_.name + ": backend threw a non-standard exception");
    }
  }

  // Removes the keys that no lookup holds locked; locked ones report 0.
  template <class C>
  Status RemoveUnlocked(C& c, std::span<const std::string> keys, Deadline d,
                        std::span<uint8_t> out) {
    std::vector<std::string> free_keys;
    std::vector<size_t> where;
    {
      std::lock_guard lock(lock_mu_);
      for (size_t i = 0; i < keys.size(); ++i) {
        if (locks_.contains(keys[i])) continue;
        free_keys.push_back(keys[i]);
        where.push_back(i);
      }
    }
    std::vector<uint8_t> removed(free_keys.size(), 0);
    Status s = self().BatchRemove(c, std::span<const std::string>(free_keys), d,
                                  std::span<uint8_t>(removed));
    for (size_t i = 0; i < where.size(); ++i) out[where[i]] = removed[i];
    return s;
  }

  void FinishTile(const Tile& t, Status s) {
    Batch& b = *t.batch;
    if (!s.ok()) {
      std::lock_guard lock(b.mu);
      if (b.first_error.ok()) b.first_error = std::move(s);
    }
    if (b.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      inflight_bytes_.fetch_sub(b.inflight);
      Complete(b);
    }
  }

  // The batch's completion, counted; Complete also queues and signals it.
  Completion Finish(Batch& b) {
    Completion c;
    c.id = b.id;
    c.op = b.op;
    {
      std::lock_guard lock(b.mu);
      c.status = b.first_error;
    }
    c.results = std::move(b.results);
    c.bytes = b.bytes.load();
    c.latency = std::chrono::steady_clock::now() - b.start;
    auto& k = counters_[Idx(b.op)];
    k.tasks.fetch_add(1);
    if (!c.status.ok()) k.failed_tasks.fetch_add(1);
    k.keys.fetch_add(c.results.size());
    k.hits.fetch_add(c.Hits());
    k.bytes.fetch_add(c.bytes);
    return c;
  }

  void Complete(Batch& b) {
    Completion c = Finish(b);
    const size_t i = Idx(b.op);
    {
      std::lock_guard lock(cq_mu_[i]);
      cq_[i].push_back(std::move(c));
    }
    if (!signaled_[i].exchange(true)) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t w = ::write(efd_[i], &one, sizeof(one));
    }
  }

  static inline thread_local std::optional<ConnectorOp> thread_op_;

  ConnectorOptions options_;
  std::atomic<TaskId> next_id_{1};
  std::vector<std::shared_ptr<OpPool>> pools_;
  std::array<std::shared_ptr<OpPool>, kConnectorOps> pool_for_{};
  std::atomic<uint64_t> inflight_bytes_{0};
  std::array<AtomicCounters, kConnectorOps> counters_{};

  mutable std::mutex lock_mu_;
  std::unordered_map<std::string, uint32_t> locks_;

  std::array<int, kConnectorOps> efd_{-1, -1, -1, -1};
  std::array<std::atomic<bool>, kConnectorOps> signaled_{};
  std::array<std::mutex, kConnectorOps> cq_mu_;
  std::array<std::vector<Completion>, kConnectorOps> cq_;
};

}  // namespace kvtier
