// The L2 phase of a LOOKUP job: brings the chunks that follow the L1 hits back from the L2
// cascade into L1, so that the coming RETRIEVEs are served from memory. Run's phases, each a
// function over one Plan:
//  1. LookupAndLock: in every available adapter at once (a down adapter is a miss);
//  2. ChooseSources: each key from the first adapter that has it, trimmed to the longest run of
//     chunks that every rank has;
//  3. ReserveInL1: L1 staging objects for the plan (halving it while L1 has no room); keys
//     already resident in L1 are pinned instead; then UnlockOutsidePlan releases the adapter
//     locks the plan does not use;
//  4. LoadIntoL1: from each adapter straight into the staging objects, then unlock;
//  5. Publish what loaded: the leading run of complete chunks pinned for the RETRIEVEs, loaded
//     keys after a gap without pins, failed keys dropped (never visible).
// Every wait is bounded by the adapter's deadline (plus a grace second for a backend that
// overruns it): a slow or dead backend makes misses, never a hung LOOKUP. If a completion comes
// after that, its locks and staging objects are released when it does.
#pragma once

#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/object_key.h"
#include "l1/l1_pool.h"
#include "server/l2_cascade.h"

namespace kvtier {

struct L2PrefetchResult {
  size_t chunks = 0;              // leading chunks now in L1 for every rank
  std::vector<ObjectKey> pinned;  // one read lock each, for the RETRIEVEs
};

class L2Prefetcher {
 public:
  L2Prefetcher(L1Pool& l1, L2Cascade& l2) : l1_(l1), l2_(l2) {}

  // keys[r][c]: rank r's key of the c-th chunk after the L1 hits (same count for every rank);
  // sizes[r]: rank r's object size.
  L2PrefetchResult Run(const std::vector<std::vector<ObjectKey>>& keys,
                       const std::vector<uint64_t>& sizes);

 private:
  struct Plan;  // l2_prefetch.cc
  void LookupAndLock(Plan& p);
  void ChooseSources(Plan& p);
  void ReserveInL1(Plan& p);
  void UnlockOutsidePlan(const Plan& p);
  void LoadIntoL1(Plan& p);
  L2PrefetchResult Publish(const Plan& p);

  // Reserves the first `count` keys of every rank, all ranks or none.
  bool Reserve(const std::vector<std::vector<ObjectKey>>& keys, const std::vector<uint64_t>& sizes,
               size_t count, std::vector<std::vector<WriteSlot>>& slots);
  // Unlocks names[i] in the adapter where which[i] is set.
  void Unlock(size_t adapter, const std::vector<std::string>& names,
              const std::vector<uint8_t>& which);

  L1Pool& l1_;
  L2Cascade& l2_;
};

}  // namespace kvtier
