// STORE and RETRIEVE. The worker's registered blocks are memfds, or GPU memory through CUDA IPC.
// A chunk is published only after its bytes have landed; a RETRIEVE replies once they are in
// the worker's blocks (for GPU blocks the reply is the completion event).
#include "server/transfer_handlers.h"

#include <unordered_set>

#include "server/block_copies.h"
#include "server/handler_table.h"

namespace kvtier {
namespace {

struct Prepared {
  std::shared_ptr<const RegisteredWorker> worker;
  wire::TransferRequest req;
  ResolvedPrefix prefix;
  std::vector<ObjectKey> keys;
};

// Decodes and validates a STORE/RETRIEVE body; nothing is touched unless all of it is valid.
Result<Prepared> Prepare(ServerContext& ctx, const wire::BodyReader& body) {
  auto req = wire::TransferRequest::Decode(body);
  if (!req.ok()) return req.status();
  auto worker = ctx.workers.Get(req->instance_id);
  if (!worker.ok()) return worker.status();
  auto session = ctx.sessions.GetOrCreate(req->key.request_id);
  auto prefix = ctx.resolver.Resolve(req->key, *session);
  if (!prefix.ok()) return prefix.status();
  const auto& w = **worker;
  KVT_RETURN_IF_ERROR(
      ValidateBlockIds(w, req->block_ids, prefix->end_chunk * ctx.config.chunk_size));
  Prepared p{*worker, std::move(req).value(), std::move(prefix).value(), {}};
  p.keys = KeyResolver::KeysForRank(p.prefix, w.model, w.world_size, w.rank, p.req.key.salt);
  return p;
}

std::span<const uint32_t> ChunkBlocks(const Prepared& p, uint64_t chunk, uint32_t chunk_size) {
  const uint64_t per_chunk = chunk_size / p.worker->layout.block_tokens;
  return std::span<const uint32_t>(p.req.block_ids).subspan(chunk * per_chunk, per_chunk);
}

// The lookup pinned this rank's keys for this RETRIEVE; they are no longer needed.
void ReleaseLookupPins(ServerContext& ctx, const std::string& request_id,
                       const std::vector<ObjectKey>& keys) {
  auto s = ctx.sessions.Find(request_id);
  if (!s) return;
  const std::unordered_set<ObjectKey, ObjectKeyHash> wanted(keys.begin(), keys.end());
  std::vector<ObjectKey> mine;
  {
    std::lock_guard lock(s->mu);
    std::erase_if(s->lookup_pins, [&](const ObjectKey& k) {
      if (!wanted.contains(k)) return false;
      mine.push_back(k);
      return true;
    });
  }
  ctx.l1->Unpin(mine);
}

}  // namespace

TransferCounters::TransferCounters(MetricsRegistry& metrics)
    : stored_bytes(metrics.GetCounter("kvtier_store_bytes_total", "Bytes copied into L1")),
      skipped_chunks(metrics.GetCounter("kvtier_store_skipped_chunks_total",
                                        "Chunks a STORE could not keep because L1 was full")),
      loaded_bytes(
          metrics.GetCounter("kvtier_retrieve_bytes_total", "Bytes copied from L1 to workers")),
      hit_chunks(
          metrics.GetCounter("kvtier_retrieve_hit_chunks_total", "Chunks RETRIEVE found in L1")),
      miss_chunks(metrics.GetCounter("kvtier_retrieve_miss_chunks_total",
                                     "Chunks RETRIEVE asked for but did not find")) {}

Status HandleStore(ServerContext& ctx, const TransferCounters& counters,
                   const wire::BodyReader& body, wire::BodyWriter& reply) {
  auto p = Prepare(ctx, body);
  if (!p.ok()) return p.status();
  const uint32_t cs = ctx.config.chunk_size;
  const uint64_t size = p->worker->layout.ObjectBytes(cs);
  wire::StoreReply out;
  auto slots = ctx.l1->ReserveWrite(p->keys, size);
  if (!slots.ok()) {
    if (slots.status().code() != Code::kOutOfMemory) return slots.status();
    out.skipped_chunks = p->keys.size();  // L1 full: skip, never block
    counters.skipped_chunks->Inc(static_cast<double>(out.skipped_chunks));
    out.Encode(reply);
    return Status::Ok();
  }
  std::vector<ObjectKey> written;
  std::vector<ConstBuffer> bytes;  // for the copy to L2
  std::vector<cuda::Copy> copies;
  for (size_t i = 0; i < slots->size(); ++i) {
    const WriteSlot& s = (*slots)[i];
    if (s.data == nullptr) {
      ++out.present_chunks;
      continue;
    }
    GatherChunk(*p->worker, ChunkBlocks(*p, p->prefix.first_chunk + i, cs), s.data, copies);
    written.push_back(p->keys[i]);
    if (ctx.l2_writer) bytes.push_back({s.data, s.size});
  }
  if (Status copied = RunCopies(*p->worker, std::move(copies), true); !copied.ok()) {
    ctx.l1->AbortWrite(written);  // nothing half-copied becomes visible
    return copied;
  }
  // With L2, published and pinned in one step: see l2_writer.h.
  ctx.l1->FinishWrite(written, ctx.l2_writer ? ctx.l2_writer->PinsPerKey() : 0);
  out.stored_chunks = written.size();
  counters.stored_bytes->Inc(static_cast<double>(written.size() * size));
  if (ctx.l2_writer) ctx.l2_writer->OnL1Written(std::move(written), std::move(bytes));
  out.Encode(reply);
  return Status::Ok();
}

Status HandleRetrieve(ServerContext& ctx, const TransferCounters& counters,
                      const wire::BodyReader& body, wire::BodyWriter& reply) {
  auto p = Prepare(ctx, body);
  if (!p.ok()) return p.status();
  const uint32_t cs = ctx.config.chunk_size;
  const uint64_t size = p->worker->layout.ObjectBytes(cs);
  // Our own pin keeps the objects alive while we copy, whatever the lookup did.
  auto pins = ctx.l1->Pin(p->keys);
  wire::RetrieveReply out;
  std::vector<cuda::Copy> copies;
  for (size_t i = 0; i < pins.size() && pins[i].data != nullptr; ++i) {
    if (pins[i].size != size) break;  // stored under another layout: not ours
    const uint64_t chunk = p->prefix.first_chunk + i;
    const uint64_t chunk_start = chunk * cs;
    const uint64_t skip =
        p->req.skip_first_n_tokens > chunk_start ? p->req.skip_first_n_tokens - chunk_start : 0;
    ScatterChunk(*p->worker, ChunkBlocks(*p, chunk, cs), pins[i].data, skip, copies);
    ++out.retrieved_chunks;
  }
  const Status copied = RunCopies(*p->worker, std::move(copies), false);
  // Release exactly the pins we took: a key that was absent then may be pinned by someone else
  // by now.
  std::vector<ObjectKey> ours;
  for (size_t i = 0; i < pins.size(); ++i) {
    if (pins[i].data != nullptr) ours.push_back(p->keys[i]);
  }
  ctx.l1->Unpin(ours);
  ReleaseLookupPins(ctx, p->req.key.request_id, p->keys);
  if (!copied.ok()) return copied;  // the engine recomputes the whole range
  counters.hit_chunks->Inc(static_cast<double>(out.retrieved_chunks));
  counters.miss_chunks->Inc(static_cast<double>(p->keys.size() - out.retrieved_chunks));
  counters.loaded_bytes->Inc(static_cast<double>(out.retrieved_chunks * size));
  out.Encode(reply);
  return Status::Ok();
}

void RegisterTransferHandlers(ServerContext& ctx, HandlerTable& table) {
  const TransferCounters counters(ctx.metrics);
  table.Add(wire::RequestType::kStore, Lane::kTransfer,
            [&ctx, counters](const wire::BodyReader& body, wire::BodyWriter& reply) {
              return HandleStore(ctx, counters, body, reply);
            });
  table.Add(wire::RequestType::kRetrieve, Lane::kTransfer,
            [&ctx, counters](const wire::BodyReader& body, wire::BodyWriter& reply) {
              return HandleRetrieve(ctx, counters, body, reply);
            });
}

}  // namespace kvtier
