// STORE and RETRIEVE as named functions of the server context, so they can be driven in-process
// (RegisterTransferHandlers puts them in the handler table; tests call them directly).
// Only block ids cross the socket; the bytes move between the worker's registered blocks and L1
// on the calling (transfer-lane) thread.
// Thread-safety: both may run at once on any threads; they share only the context's members,
// each safe on its own (server_context.h).
#pragma once

#include "common/metrics.h"
#include "common/status.h"
#include "server/server_context.h"
#include "wire/body_codec.h"

namespace kvtier {

// The counters STORE and RETRIEVE keep, registered once (the same names find the same counters).
struct TransferCounters {
  explicit TransferCounters(MetricsRegistry& metrics);
  Counter* stored_bytes;    // kvtier_store_bytes_total
  Counter* skipped_chunks;  // kvtier_store_skipped_chunks_total: L1 was full
  Counter* loaded_bytes;    // kvtier_retrieve_bytes_total
  Counter* hit_chunks;      // kvtier_retrieve_hit_chunks_total
  Counter* miss_chunks;     // kvtier_retrieve_miss_chunks_total
};

// STORE: copies the chunks of a wire::TransferRequest from the worker's blocks into L1 and
// publishes them once their bytes have landed (and hands them to the L2 writer, when there is
// one); writes a wire::StoreReply. A full L1 skips the chunks (ok, counted), never blocks.
// A bad request (undecodable, unknown worker, range not of full chunks, too few or
// out-of-range block ids) is its error and touches nothing.
Status HandleStore(ServerContext& ctx, const TransferCounters& counters,
                   const wire::BodyReader& body, wire::BodyWriter& reply);

// RETRIEVE: copies the leading chunks of the range that L1 holds (under this worker's layout)
// into the worker's blocks, leaving skip_first_n_tokens untouched, then releases the lookup pins
// the request's session held on the range's keys (also when the copy failed); writes a
// wire::RetrieveReply once the bytes are in the blocks. Bad requests as for HandleStore.
Status HandleRetrieve(ServerContext& ctx, const TransferCounters& counters,
                      const wire::BodyReader& body, wire::BodyWriter& reply);

}  // namespace kvtier
