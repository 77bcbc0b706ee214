// libFuzzer target: arbitrary multipart messages into the LMCache MP codec's request decoder
// (server/lmcache_codec.h), the frames a ZMQ ROUTER hands the front after the routing id.
// Input: one selector byte, then parts, each a 2-byte little-endian length and that many bytes
// (the last part is cut short where the input ends). Selector bit 0 clear: the parts are a whole
// message for Decode, whose decoded requests are answered through EncodeReply. Bit 0 set: the
// parts go straight to one argument decoder (bits 1-2 pick register, store, retrieve or
// block allocation) with exactly the part count it is written for, so the fuzzer does not have
// to find a valid uid and op first. Checks: no crash or sanitizer report; Decode's own contract
// (a request, a stream control message or a refusal that says why) is asserted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/lmcache_args.h"
#include "server/lmcache_codec.h"

namespace kvtier::lmcache {
namespace {

std::vector<std::string_view> SplitParts(const uint8_t* data, size_t size) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at + 2 <= size && parts.size() < 64) {
    size_t len = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    if (len > size - at) len = size - at;
    parts.emplace_back(reinterpret_cast<const char*>(data + at), len);
    at += len;
  }
  return parts;
}

void CheckDecode(const std::vector<std::string_view>& frames) {
  const Decoded d = Decode(frames);
  if (const auto* r = std::get_if<Refusal>(&d)) {
    if (r->reason.empty() || r->detail.empty()) std::abort();  // a refusal must say why
    return;
  }
  if (const auto* req = std::get_if<Request>(&d)) {
    if (req->uid_frame != frames[0] || req->op_frame != frames[1]) std::abort();  // echoed as is
    (void)OpName(req->op);
    (void)EncodeReply(req->uid_frame, req->op_frame, std::monostate{});
    (void)EncodeReply(req->uid_frame, req->op_frame, TransferResult{req->uid_frame, true});
  }
}

void CheckArgDecoder(uint8_t selector, const std::vector<std::string_view>& frames) {
  static constexpr size_t kParts[] = {7, 4, 5, 3};  // register, store, retrieve, allocation
  const unsigned which = (selector >> 1) & 3;
  if (frames.size() != kParts[which]) return;
  std::vector<Part> parts;
  for (std::string_view f : frames) {
    auto p = Part::Parse(f);
    if (!p.ok()) return;
    parts.push_back(std::move(p).value());
  }
  Key key;
  (void)DecodeKey(parts[0], key);
  auto d = which == 0   ? DecodeRegister(parts)
           : which == 3 ? DecodeBlockAllocation(parts)
                        : DecodeTransfer(parts, which == 2);
  if (!d.ok() && (d.error().reason.empty() || d.error().detail.empty())) std::abort();
}

}  // namespace
}  // namespace kvtier::lmcache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto frames = kvtier::lmcache::SplitParts(data + 1, size - 1);
  if (data[0] & 1) {
    kvtier::lmcache::CheckArgDecoder(data[0], frames);
  } else {
    kvtier::lmcache::CheckDecode(frames);
  }
  return 0;
}
