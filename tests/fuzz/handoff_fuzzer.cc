// libFuzzer target: arbitrary bytes as the Unix-socket hand-off request. Only the sanitizers
// judge; a parsed request's reply is built too, as the server would.
#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/fd_passing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto count = kvtier::wire::ParseHandoffRequest(data, size);
  const std::string reply = kvtier::wire::BuildHandoffReply(
      count.ok() ? kvtier::Status::Ok() : count.status(), count.ok() ? count.value() : 0);
  (void)reply;
  return 0;
}
