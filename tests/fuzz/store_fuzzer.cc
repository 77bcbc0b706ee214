// libFuzzer target: the kvtier store's decoders of untrusted bytes. The first byte picks one:
//   0: a master RPC request (next byte: the op frame's value, rest: the body), then each master
//      reply decoder on the same bytes (a client reads those from the network);
//   1: a whole dummy frame as a node reads it off its Unix socket, then a dummy reply body;
//   2: a data-plane request header, its validation against a segment size, and a reply header;
//   3: the master port's byte stream: a handshake hello, then RPC records in the clear and sealed
//      (the next byte picks the chunk size they arrive in), each body through the request decoder.
// Only the sanitizers judge; a decoded request is encoded again, as the peers would.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>

#include "store/protocol/dummy_protocol.h"
#include "store/protocol/master_protocol.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/rpc_records.h"
#include "wire/secret_channel.h"

namespace {

using namespace kvtier::store;

void Master(const uint8_t* data, size_t size) {
  if (size < 1) return;
  auto req = DecodeMasterRequest(data[0], data + 1, size - 1);
  if (req.ok()) (void)EncodeMasterRequest(*req);
  const void* body = data + 1;
  const size_t n = size - 1;
  (void)DecodeStatusReply(body, n);
  (void)DecodePingReply(body, n);
  (void)DecodePutStartReply(body, n, data[0]);
  (void)DecodeStatusesReply(body, n, data[0]);
  (void)DecodeGetReplicasReply(body, n, data[0]);
  (void)DecodeExistReply(body, n, data[0]);
  (void)DecodeRemoveAllReply(body, n);
  (void)DecodeRepairsReply(body, n);
}

void Dummy(const uint8_t* data, size_t size) {
  auto req = dummy::DecodeRequestFrame(data, size);
  if (req.ok()) (void)dummy::EncodeRequest(*req);
  if (size < 1) return;
  (void)dummy::DecodeReply(static_cast<dummy::Op>(data[0] % 16), data + 1, size - 1);
}

void DataPlane(const uint8_t* data, size_t size) {
  if (size < dp::kRequestHeaderBytes + 8) return;
  std::span<const uint8_t, dp::kRequestHeaderBytes> head(data, dp::kRequestHeaderBytes);
  auto h = dp::DecodeRequestHeader(head);
  uint64_t segment_size;
  std::memcpy(&segment_size, data + dp::kRequestHeaderBytes, 8);
  if (h.ok()) (void)dp::ValidateRequest(*h, segment_size);
  std::span<const uint8_t, dp::kReplyHeaderBytes> reply(data, dp::kReplyHeaderBytes);
  (void)dp::DecodeReplyHeader(reply);
}

void RpcStream(const uint8_t* data, size_t size) {
  (void)kvtier::wire::DecodeHello(data, size);
  if (size < 1) return;
  const size_t chunk = 1 + data[0] % 64;
  static const kvtier::wire::HandshakeKeys keys = kvtier::wire::DeriveHandshakeKeys(
      "fuzz", kvtier::wire::Nonce{}, kvtier::wire::Nonce{});
  for (const bool sealed : {false, true}) {
    rpc::RecordReader reader(1 << 16, sealed ? std::make_unique<kvtier::wire::RecordCipher>(
                                                   keys.client_to_server)
                                             : nullptr);
    for (size_t at = 1; at < size; at += chunk) {
      const size_t n = std::min(chunk, size - at);
      std::memcpy(reader.Space(n), data + at, n);
      reader.Filled(n);
      while (true) {
        auto m = reader.Next();
        if (!m.ok()) return;
        if (!m->has_value()) break;
        auto req = DecodeMasterRequest((*m)->op, (*m)->body.data(), (*m)->body.size());
        if (req.ok()) (void)EncodeMasterRequest(*req);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0: Master(data + 1, size - 1); break;
    case 1: Dummy(data + 1, size - 1); break;
    case 2: DataPlane(data + 1, size - 1); break;
    default: RpcStream(data + 1, size - 1); break;
  }
  return 0;
}
