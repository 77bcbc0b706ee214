// The take_repairs reply: the tasks' keys, and per key two replica columns, the source first
// and then the target (master_columns.h).
#include <fmt/format.h>

#include "store/protocol/master_columns.h"
#include "store/protocol/master_protocol.h"

namespace kvtier::store {

using namespace master_columns;

std::string EncodeRepairsReply(const Result<std::vector<RepairTask>>& tasks) {
  if (!tasks.ok()) return EncodeStatusReply(tasks.status());
  BodyWriter w;
  PutStatus(w, Status::Ok());
  std::vector<std::string> keys;
  ReplicaColumns columns;
  for (const RepairTask& t : *tasks) {
    keys.push_back(t.key);
    const std::vector<ReplicaDesc> pair = {t.source, t.target};
    columns.Add(&pair);
  }
  PutByteList(w, "keys", keys);
  columns.Write(w);
  return w.Finish();
}

Result<std::vector<RepairTask>> DecodeRepairsReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  std::vector<std::string> keys;
  if (Status s = GetByteList(*r, "keys", kMaxBatchKeys, keys); !s.ok()) {
    return BadReply(s.message());
  }
  auto replicas = GetReplicaColumns(*r, keys.size());
  if (!replicas.ok()) return BadReply(replicas.status().message());
  std::vector<RepairTask> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<ReplicaDesc>& pair = (*replicas)[i];
    if (pair.size() != 2) {
      return BadReply(
          fmt::format("repair {} has {} replicas, not a source and a target", i, pair.size()));
    }
    out.push_back({std::move(keys[i]), std::move(pair[0]), std::move(pair[1])});
  }
  return out;
}

}  // namespace kvtier::store
