// A takeover's second half (docs/store/failover.md): once the segments are restored from etcd,
// every segment's node is asked for its records (REPORT, in chunks, up to 16 nodes at once) and
// the master merges them (MasterService::AddReported). The records that lost the merge are sent
// back as REMOVEs. A segment whose node does not answer is unmounted: the master cannot know
// what it holds, so the node mounts afresh under a new id (and with no records) when it next
// pings, rather than have its space handed out over objects it still reports.
#pragma once

#include <cstdint>
#include <vector>

#include "store/master/master_service.h"
#include "store/master/metadata_journal.h"
#include "store/master/node_journal.h"
#include "store/transport/records_client.h"

namespace kvtier::store {

struct ResyncStats {
  uint64_t segments = 0;         // reported in full
  uint64_t segments_failed = 0;  // unmounted: their node did not answer
  uint64_t records = 0;          // reported
  uint64_t dropped = 0;          // lost the merge, sent back as REMOVEs
  double seconds = 0;
};

ResyncStats ResyncFromNodes(MasterService& service, NodeJournal& journal, RecordsClient& client,
                            uint64_t term, const std::vector<JournalSegment>& segments);

}  // namespace kvtier::store
