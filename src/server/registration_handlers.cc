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
              KVT_LOG_INFO("registered instance={} model={} rank={}/{} blocks={} object_bytes={}",
                           req->instance_id, req->model, req->rank, req->world_size,
                           req->layout.num_blocks, req->layout.ObjectBytes(ctx.config.chunk_size));
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
