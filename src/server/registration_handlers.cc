// REGISTER_KV_BUFFERS / UNREGISTER_KV_BUFFERS.
#include "common/logging.h"
#include "server/handler_table.h"

namespace kvtier {

void RegisterRegistrationHandlers(ServerContext& ctx, HandlerTable& table) {
  table.Add(wire::RequestType::kRegisterKvBuffers, Lane::kLookup,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter& reply) {
              auto req = wire::RegisterRequest::Decode(body);
              if (!req.ok()) return req.status();
              KVT_RETURN_IF_ERROR(ctx.workers.Register(*req, ctx.config.chunk_size));
              if (!req->gpu_buffers.empty() && !ctx.l1_pinned.exchange(true)) {
                // Once, at the first GPU worker: DMA to page-locked L1 runs at the link's speed
                // (unlocked memory still works, staged through the driver, slower).
                const Status pinned =
                    cuda::PinHostMemory(ctx.l1->ArenaBase(), ctx.l1->ArenaSize());
                if (!pinned.ok()) {
                  KVT_LOG_WARN("cannot page-lock L1 for GPU copies ({}); they run slower",
                               pinned.ToString());
                }
              }
              KVT_LOG_INFO(
                  "registered instance={} model={} rank={}/{} blocks={} object_bytes={} on={}",
                  req->instance_id, req->model, req->rank, req->world_size,
                  req->layout.num_blocks, req->layout.ObjectBytes(ctx.config.chunk_size),
                  req->gpu_buffers.empty() ? "host" : "gpu");
              reply.Put("object_bytes", req->layout.ObjectBytes(ctx.config.chunk_size));
              return Status::Ok();
            });
  table.Add(wire::RequestType::kUnregisterKvBuffers, Lane::kLookup,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter&) {
              auto req = wire::InstanceRequest::Decode(body);
              if (!req.ok()) return req.status();
              return ctx.workers.Unregister(req->instance_id);
            });
}

}  // namespace kvtier
