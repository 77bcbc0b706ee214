// LOOKUP, QUERY_PREFETCH_STATUS, FREE_LOOKUP_LOCKS, END_SESSION: the scheduler's side.
#include <fmt/format.h>

#include <algorithm>

#include "server/client_inflight.h"
#include "server/handler_table.h"
#include "server/prefetch_controller.h"

namespace kvtier {
namespace {

void ReleaseAllPins(ServerContext& ctx, Session& s) {
  std::vector<ObjectKey> pins;
  {
    std::lock_guard lock(s.mu);
    pins.swap(s.lookup_pins);
  }
  ctx.l1->Unpin(pins);
}

Status UnknownSession(const std::string& id) {
  return Status(Code::kNotFound, fmt::format("no session for request_id '{}'", id));
}

// QUERY_PREFETCH_STATUS's reply as the session stands; `s.mu` is held.
Status PrefetchStatus(const Session& s, const std::string& id, wire::BodyWriter& reply) {
  if (!s.lookup_running && !s.lookup_hits) {
    return Status(Code::kNotFound, fmt::format("request '{}' has no LOOKUP", id));
  }
  wire::PrefetchStatusReply out;
  out.hit_chunks = s.lookup_hits;
  out.Encode(reply);
  return Status::Ok();
}

}  // namespace

void RegisterLookupHandlers(ServerContext& ctx, HandlerTable& table,
                            std::shared_ptr<PrefetchController> prefetch) {

  // Everything here is cheap enough for the socket thread: LOOKUP only validates and hashes (the
  // job runs on the prefetch pool), the others read a session or release its locks.
  table.Add(wire::RequestType::kLookup, Lane::kInline,
            [&ctx, prefetch](const wire::BodyReader& body, wire::BodyWriter&) {
              auto key = wire::PrefixKey::Decode(body);
              if (!key.ok()) return key.status();
              if (key->model.empty()) return Status(Code::kInvalidArgument, "missing 'model'");
              if (key->request_id.empty()) {
                return Status(Code::kInvalidArgument, "LOOKUP needs a request_id");
              }
              auto session = ctx.sessions.GetOrCreate(key->request_id);
              auto prefix = ctx.resolver.Resolve(*key, *session);
              if (!prefix.ok()) return prefix.status();
              // The job keeps this request's in-flight slot until it is done.
              prefetch->Submit(session, std::move(prefix).value(), key->model, key->world_size,
                               key->salt, CurrentRequestSlot());
              return Status::Ok();
            },
            /*starts_job=*/true);

  // With `wait_us` while the job runs, the reply is held until the job publishes (it sends the
  // ticket) or the wait ends (the socket thread answers with the status then).
  table.Add(wire::RequestType::kQueryPrefetchStatus, Lane::kInline,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter& reply) {
              auto req = wire::SessionRequest::Decode(body);
              if (!req.ok()) return req.status();
              auto s = ctx.sessions.Find(req->request_id);
              if (!s) return UnknownSession(req->request_id);
              std::lock_guard lock(s->mu);
              // Polls answered at their deadline leave their tickets here until the job ends;
              // only those still waiting count against the limit.
              std::erase_if(s->status_waiters, [](const auto& t) { return !t.Waiting(); });
              if (s->lookup_running && req->wait_us > 0 &&
                  s->status_waiters.size() < Session::kMaxStatusWaiters) {
                const uint64_t wait_us = std::min(req->wait_us, wire::kMaxStatusWaitUs);
                auto ticket = HoldCurrentReply(
                    ctx.clock.NowNs() + static_cast<int64_t>(wait_us) * 1000,
                    [s, id = req->request_id](wire::BodyWriter& w) {
                      std::lock_guard lock(s->mu);
                      return PrefetchStatus(*s, id, w);
                    });
                if (ticket) {
                  s->status_waiters.push_back(std::move(*ticket));
                  return Status::Ok();
                }
              }
              return PrefetchStatus(*s, req->request_id, reply);
            });

  table.Add(wire::RequestType::kFreeLookupLocks, Lane::kInline,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter&) {
              auto req = wire::SessionRequest::Decode(body);
              if (!req.ok()) return req.status();
              auto s = ctx.sessions.Find(req->request_id);
              if (!s) return UnknownSession(req->request_id);
              ReleaseAllPins(ctx, *s);
              return Status::Ok();
            });

  table.Add(wire::RequestType::kEndSession, Lane::kInline,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter&) {
              auto req = wire::SessionRequest::Decode(body);
              if (!req.ok()) return req.status();
              auto s = ctx.sessions.Remove(req->request_id);
              if (s) ReleaseAllPins(ctx, *s);
              return Status::Ok();  // ending an unknown session is harmless
            });
}

}  // namespace kvtier
