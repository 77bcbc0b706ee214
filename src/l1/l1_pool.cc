// L1Pool::Create: option checks and arena creation. The pool itself is in l1_pool_impl.cc.
#include "l1/l1_pool.h"

#include <string>

#include "common/memfd.h"
#include "l1/l1_pool_impl.h"

namespace kvtier {
namespace {

Status ValidateOptions(const L1Options& o) {
  auto invalid = [](std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); };
  if (o.alignment == 0 || (o.alignment & (o.alignment - 1)) != 0) {
    return invalid("L1 alignment must be a power of two, got " + std::to_string(o.alignment));
  }
  if (o.capacity_bytes == 0) return invalid("L1 capacity must be > 0");
  if (o.capacity_bytes < o.alignment) {
    return invalid("L1 capacity (" + std::to_string(o.capacity_bytes) +
                   " bytes) is smaller than the alignment (" + std::to_string(o.alignment) +
                   " bytes)");
  }
  // Written so that NaN fails too.
  if (!(o.trigger_watermark > 0.0 && o.trigger_watermark <= 1.0)) {
    return invalid("L1 trigger watermark must be in (0, 1], got " +
                   std::to_string(o.trigger_watermark));
  }
  if (!(o.target_watermark > 0.0 && o.target_watermark <= o.trigger_watermark)) {
    return invalid(
        "L1 target watermark must be in (0, trigger=" + std::to_string(o.trigger_watermark) +
        "], got " + std::to_string(o.target_watermark));
  }
  if (o.read_lock_ttl.count() <= 0 || o.write_lock_ttl.count() <= 0) {
    return invalid("L1 read and write lock TTLs must be > 0");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<L1Pool>> L1Pool::Create(const L1Options& options) {
  KVT_RETURN_IF_ERROR(ValidateOptions(options));
  auto policy = MakeEvictionPolicy(options.policy);
  if (!policy.ok()) return policy.status();
  auto arena =
      MappedFile::Create("kvtier-l1", options.capacity_bytes, options.prefault, options.huge_pages);
  if (!arena.ok()) {
    return Status(arena.status().code(), "cannot create the L1 arena: " + arena.status().message());
  }
  std::unique_ptr<L1Pool> pool =
      std::make_unique<L1PoolImpl>(options, std::move(arena).value(), std::move(policy).value());
  return pool;
}

}  // namespace kvtier
