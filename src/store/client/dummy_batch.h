// The client-side checks of a dummy's zero-copy batch (BatchPutFrom, BatchGetInto): one buffer
// and size per key, the batch limit, valid keys, and every buffer inside memory the node sees.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "store/client/dummy_memory.h"
#include "store/protocol/dummy_protocol.h"

namespace kvtier::store {

// Fills req.keys/ranges with the keys to send and `out` (one entry per key) with the errors of
// the others, without a round trip. Returns the indices sent.
std::vector<size_t> PrepareZeroCopy(const DummyMemory& memory, const std::vector<std::string>& keys,
                                    const std::vector<void*>& buffers,
                                    const std::vector<size_t>& sizes, dummy::Request& req,
                                    std::vector<Status>& out);

}  // namespace kvtier::store
