// RECORDS and REPORT requests to a node's data plane (records_client.h).
#include "store/transport/records_client.h"

#include <fmt/format.h>

#include <span>

#include "store/protocol/store_errors.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/tcp_io.h"

namespace kvtier::store {

RecordsClient::RecordsClient(std::string auth_token, std::chrono::milliseconds timeout)
    : timeout_(timeout), pool_(2, std::move(auth_token)) {}

Status RecordsClient::Send(const std::string& endpoint, uint64_t segment_id, uint64_t term,
                           std::string_view batch) {
  auto reply = Call(endpoint, static_cast<uint8_t>(dp::Op::kRecords), segment_id, 0, term, batch);
  return reply.ok() ? Status::Ok() : reply.status();
}

Result<RecordReport> RecordsClient::Report(const std::string& endpoint, uint64_t segment_id,
                                           uint64_t term, uint64_t cursor) {
  auto reply = Call(endpoint, static_cast<uint8_t>(dp::Op::kReport), segment_id, cursor, term, {});
  if (!reply.ok()) return reply.status();
  auto report = DecodeRecordReport(*reply);
  if (!report.ok()) {
    return StoreError(ErrorCode::RPC_FAIL,
                      fmt::format("REPORT from {}: {}", endpoint, report.status().message()));
  }
  return report;
}

Result<std::string> RecordsClient::Call(const std::string& endpoint, uint8_t op,
                                        uint64_t segment_id, uint64_t cursor, uint64_t term,
                                        std::string_view payload) {
  const tcp::Deadline deadline = tcp::SteadyClock::now() + timeout_;
  const auto fail = [&](const Status& s) {
    const ErrorCode code =
        s.code() == Code::kTimeout ? ErrorCode::RPC_TIMEOUT : ErrorCode::RPC_FAIL;
    return StoreError(code, fmt::format("object records at {}: {}", endpoint, s.message()));
  };
  auto conn = pool_.Acquire(endpoint, deadline);
  if (!conn.ok()) return fail(conn.status());
  uint8_t header[dp::kRequestHeaderBytes];
  dp::EncodeRequestHeader({static_cast<dp::Op>(op), 1, segment_id, cursor, payload.size(), term},
                          std::span<uint8_t, dp::kRequestHeaderBytes>(header));
  const int fd = conn->fd.get();
  Status io = tcp::SendAll(fd, header, sizeof(header), deadline);
  if (io.ok()) io = tcp::SendAll(fd, payload.data(), payload.size(), deadline);
  uint8_t raw[dp::kReplyHeaderBytes];
  if (io.ok()) io = tcp::RecvAll(fd, raw, sizeof(raw), deadline);
  if (!io.ok()) return fail(io);
  auto reply = dp::DecodeReplyHeader(raw);
  if (!reply.ok()) return fail(reply.status());
  std::string body(static_cast<size_t>(reply->length), '\0');
  io = tcp::RecvAll(fd, body.data(), body.size(), deadline);
  if (!io.ok()) return fail(io);
  pool_.Release(endpoint, std::move(*conn));
  if (reply->status != 0) {
    return StoreError(ErrorCodeFromInt(reply->status),
                      fmt::format("object records at {}: {}", endpoint, body));
  }
  return body;
}

}  // namespace kvtier::store
