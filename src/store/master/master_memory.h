// The master's memory as /status reports it ("memory"), so `kvtier bench master` can divide it
// by the objects held: the allocator's bytes in use (glibc's mallinfo2: arena chunks in use plus
// mmapped blocks; absent elsewhere), the process's resident set, and what the object table
// counts of its own (object_table.h).
#pragma once

#include <nlohmann/json.hpp>

#include "store/master/object_shards.h"

namespace kvtier::store {

nlohmann::json MasterMemoryJson(const ObjectShards& shards);

}  // namespace kvtier::store
