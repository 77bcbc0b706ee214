// A free TCP port on 127.0.0.1 for a listener about to be started (bound to port 0, read back and
// released; another process may still take it first, so starters retry). Used by the benches
// and by the test fixtures.
#pragma once

#include <cstdint>

namespace kvtier {

// 0 on failure.
uint16_t FreeLoopbackPort();

}  // namespace kvtier
