// Record encoding and the incremental record reader (rpc_records.h).
#include "store/transport/rpc_records.h"

#include <fmt/format.h>

#include <cstring>

#include "common/endian.h"

namespace kvtier::store::rpc {

Status AppendRecord(std::string& out, uint64_t id, uint32_t op, std::string_view body,
                    wire::RecordCipher* cipher) {
  const size_t payload =
      kEnvelopeBytes + body.size() + (cipher != nullptr ? wire::kSealOverheadBytes : 0);
  if (payload > UINT32_MAX) return Status(Code::kTooLarge, "record over 4 GiB");
  const size_t head = out.size();
  AppendLE<uint32_t>(out, static_cast<uint32_t>(payload));
  AppendLE<uint64_t>(out, id);
  AppendLE<uint32_t>(out, op);
  out.append(body);
  if (cipher == nullptr) return Status::Ok();
  return cipher->Seal(out, head + kLengthBytes, std::string_view(out.data() + head, kLengthBytes));
}

RecordReader::RecordReader(size_t max_payload, std::unique_ptr<wire::RecordCipher> cipher)
    : max_payload_(max_payload), cipher_(std::move(cipher)) {}

char* RecordReader::Space(size_t n) {
  if (begin_ == end_) {
    begin_ = end_ = 0;
    // After a huge batch, the next small one does not keep its buffer alive.
    if (buf_.size() > kKeptBufferBytes && n <= kKeptBufferBytes) std::string().swap(buf_);
  }
  if (buf_.size() - end_ < n) {
    // Move the partial record to the front before growing, so the buffer stays about one record.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < n) buf_.resize(end_ + n);
  }
  return buf_.data() + end_;
}

Result<std::optional<Message>> RecordReader::Next() {
  if (end_ - begin_ < kLengthBytes) return std::optional<Message>();
  auto* head = reinterpret_cast<uint8_t*>(buf_.data() + begin_);
  const uint32_t length = LoadLE<uint32_t>(head);
  if (length > max_payload_) {
    return Status(Code::kTooLarge,
                  fmt::format("a record of {} bytes (the limit is {})", length, max_payload_));
  }
  if (end_ - begin_ < kLengthBytes + length) return std::optional<Message>();
  uint8_t* payload = head + kLengthBytes;
  size_t size = length;
  if (cipher_ != nullptr) {
    auto opened = cipher_->Open(payload, size,
                                std::string_view(reinterpret_cast<char*>(head), kLengthBytes));
    if (!opened.ok()) return opened.status();
    size = *opened;
  }
  if (size < kEnvelopeBytes) {
    return Status(Code::kProtocolError,
                  fmt::format("a record of {} bytes, shorter than its id and op", size));
  }
  begin_ += kLengthBytes + length;
  Message m;
  m.id = LoadLE<uint64_t>(payload);
  m.op = LoadLE<uint32_t>(payload + 8);
  m.body = std::string_view(reinterpret_cast<char*>(payload) + kEnvelopeBytes,
                            size - kEnvelopeBytes);
  return std::optional<Message>(m);
}

}  // namespace kvtier::store::rpc
