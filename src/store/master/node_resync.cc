// Asking the nodes for their records at a takeover (node_resync.h).
#include "store/master/node_resync.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "store/master/segment_pool.h"

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
      // Held whole until reported: nothing is placed over a record not yet known. (A segment
      // whose ranges an earlier version's etcd records already took is known from those.)
      if (!service.HoldSegment(seg.id, seg.size)) continue;
      const uint64_t whole = seg.size & ~(kSegmentAlignment - 1);
      const uint64_t own_serials = term << 32;
      uint64_t cursor = 0;
      uint64_t records = 0;
      uint64_t freed_to = 0;  // everything below is released or a record's
      uint64_t end = 0;       // where the node's last record ended, from its first chunk
      std::vector<ObjectRecord> drops;
      Status failed;
      // The next chunk is asked for while this one is merged.
      auto ask = [&](uint64_t from) {
        return std::async(std::launch::async, [&client, &seg, term, from] {
          return client.Report(seg.endpoint, seg.id, term, from);
        });
      };
      auto next_chunk = ask(0);
      bool first = true;
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
        if (first) {  // past the last record: free at once
          end = std::min(ChargedBytes(chunk->end), whole);
          service.ReleaseRange(seg.id, end, whole - end);
          first = false;
        }
        for (const ObjectRecord& r : chunk->records) {  // the gaps before each record
          if (r.serial > own_serials || r.offset < freed_to || r.offset >= end) continue;
          service.ReleaseRange(seg.id, freed_to, r.offset - freed_to);
          freed_to = r.offset + ChargedBytes(r.length);
        }
      } while (cursor != 0);
      if (!failed.ok()) {
        KVT_LOG_WARN(
            "master: the node of segment {} at {} did not report its objects ({}); the "
            "segment is unmounted, and the node mounts afresh",
            seg.id, seg.endpoint, failed.ToString());
        (void)service.UnmountSegment(seg.node_id, seg.id);
      } else {
        if (freed_to < end) service.ReleaseRange(seg.id, freed_to, end - freed_to);
        // Its node is alive as of now: a long report must not let it expire before its first
        // ping reaches the new leader.
        (void)service.Ping(NodeInfo{seg.node_id, seg.node_endpoint});
        if (!drops.empty()) journal.Send(drops);  // each to its own node
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
