// libFuzzer target: arbitrary bytes as a request/reply body and as an id/type frame. Every
// decoder runs on every parsed body (a server cannot trust the request type to match the body);
// decoded messages are re-encoded and layouts validated so those paths run on odd values too.
// The only checks are the sanitizers': no crash, no leak, no undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wire/body_codec.h"
#include "wire/frames.h"
#include "wire/messages.h"

namespace kvtier::wire {
namespace {

template <typename M>
void DecodeAndReencode(const BodyReader& r) {
  auto m = M::Decode(r);
  if (!m.ok()) return;
  BodyWriter w;
  m.value().Encode(w);
  const std::string bytes = w.Finish();
  (void)BodyReader::Parse(bytes.data(), bytes.size());
}

void ExerciseLayout(const BodyReader& r) {
  auto l = KvLayout::Decode(r);
  if (!l.ok()) return;
  static const std::vector<std::vector<uint64_t>> kSizes = {
      {}, {4096}, {1ULL << 30, 1ULL << 20}, {UINT64_MAX, UINT64_MAX, UINT64_MAX}};
  for (const auto& sizes : kSizes) {
    for (uint32_t chunk : {0u, 16u, 256u, UINT32_MAX}) {
      (void)l.value().Validate(sizes, chunk);
      (void)l.value().ObjectBytes(chunk);
    }
  }
}

void FuzzOne(const uint8_t* data, size_t size) {
  (void)DecodeUintFrame(data, size);
  if (size > 0) (void)DecodeUintFrame(data + 1, size - 1 < 9 ? size - 1 : 9);

  auto parsed = BodyReader::Parse(data, size);
  if (!parsed.ok()) return;
  const BodyReader& r = parsed.value();

  DecodeAndReencode<HelloRequest>(r);
  DecodeAndReencode<HelloReply>(r);
  DecodeAndReencode<KvLayout>(r);
  DecodeAndReencode<RegisterRequest>(r);
  DecodeAndReencode<PrefixKey>(r);
  DecodeAndReencode<TransferRequest>(r);
  DecodeAndReencode<InstanceRequest>(r);
  DecodeAndReencode<SessionRequest>(r);
  DecodeAndReencode<StoreReply>(r);
  DecodeAndReencode<RetrieveReply>(r);
  DecodeAndReencode<PrefetchStatusReply>(r);
  (void)DecodeStatus(r);
  (void)r.Numbers();
  ExerciseLayout(r);

  // Layouts and keys also arrive nested.
  BodyReader nested;
  if (r.Get("layout", nested).ok()) ExerciseLayout(nested);
  if (r.Get("key", nested).ok()) DecodeAndReencode<PrefixKey>(nested);
}

}  // namespace
}  // namespace kvtier::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvtier::wire::FuzzOne(data, size);
  return 0;
}
