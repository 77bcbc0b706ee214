// Asking the nodes for their records at a takeover (node_resync.h).
#include "store/master/node_resync.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "common/logging.h"

namespace kvtier::store {
namespace {

constexpr size_t kMaxConcurrentReports = 16;

}  // namespace

ResyncStats ResyncFromNodes(MasterService& service, NodeJournal& journal, RecordsClient& client,
                            uint64_t term, const std::vector<JournalSegment>& segments) {
  const auto start = std::chrono::steady_clock::now();
  ResyncStats stats;
  std::mutex mu;  // stats
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < segments.size(); i = next++) {
      const JournalSegment& seg = segments[i];
      uint64_t cursor = 0;
      uint64_t records = 0;
      std::vector<ObjectRecord> drops;
      Status failed;
      // The next chunk is asked for while this one is merged.
      auto ask = [&](uint64_t from) {
        return std::async(std::launch::async, [&client, &seg, term, from] {
          return client.Report(seg.endpoint, seg.id, term, from);
        });
      };
      auto next_chunk = ask(0);
      do {
        auto chunk = next_chunk.get();
        if (!chunk.ok()) {
          failed = chunk.status();
          break;
        }
        cursor = chunk->next_cursor;
        if (cursor != 0) next_chunk = ask(cursor);
        records += chunk->records.size();
        service.AddReported(seg.id, seg.endpoint, chunk->records, &drops);
      } while (cursor != 0);
      if (!failed.ok()) {
        KVT_LOG_WARN(
            "master: the node of segment {} at {} did not report its objects ({}); the "
            "segment is unmounted, and the node mounts afresh",
            seg.id, seg.endpoint, failed.ToString());
        (void)service.UnmountSegment(seg.node_id, seg.id);
      } else {
        // Its node is alive as of now: a long report must not let it expire before its first
        // ping reaches the new leader.
        (void)service.Ping(NodeInfo{seg.node_id, seg.node_endpoint});
        if (!drops.empty()) journal.Send(seg.id, drops);
      }
      std::lock_guard lock(mu);
      ++(failed.ok() ? stats.segments : stats.segments_failed);
      stats.records += records;
      stats.dropped += drops.size();
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min(segments.size(), kMaxConcurrentReports);
  for (size_t i = 1; i < n; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace kvtier::store
