// libFuzzer target: the L2 connectors' decoders of untrusted bytes. The first byte picks one:
//   0: an fs object file's header (a file on disk may be anything);
//   1: an L2 key as the fs connector turns it into a path, which must stay inside the
//      connector's directory (checked here: no absolute path, no "." or ".." component);
//   2: an adapter's JSON config (from the command line or a config file).
// Sanitizers judge, and a path that could leave the directory aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "connectors/adapter_config.h"
#include "connectors/fs_object_file.h"

namespace {

void CheckInsideDirectory(const std::string& path) {
  if (path.empty() || path.front() == '/') std::abort();
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") std::abort();
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> rest(data + 1, size - 1);
  const std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
  switch (data[0] % 3) {
    case 0:
      (void)kvtier::DecodeFsHeader(rest);
      break;
    case 1:
      for (uint32_t depth : {0u, 2u}) {
        auto path = kvtier::FsObjectPath(text, depth);
        if (path.ok()) CheckInsideDirectory(*path);
      }
      break;
    default:
      (void)kvtier::ParseAdapterConfig(text, 0);
      break;
  }
  return 0;
}
