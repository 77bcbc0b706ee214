// `bench store`'s metadata section: batch Exist calls per second against the master through
// ConnectMaster (the client nodes use), from 1 and more threads sharing one client. It runs in a
// forked child, so the bench process itself holds no client threads or sockets. Half of each
// batch's keys exist (a previous section's objects), half do not; every answer is checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/store/store_results.h"

namespace kvtier::bench {

struct ExistPlan {
  std::string master_address;
  std::vector<std::string> present;  // keys that exist for the whole measurement
  std::string missing_prefix;        // keys under it do not exist
  uint32_t batch = 128;
  std::vector<uint32_t> threads = {1, 4};
  double seconds = 1.0;  // per thread count
};

ExistSection MeasureMasterExist(const ExistPlan& plan);

}  // namespace kvtier::bench
