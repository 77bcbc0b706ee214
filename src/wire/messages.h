// Request and reply bodies of the cache-server protocol (docs/protocol.md). Each message knows
// how to write itself into a BodyWriter and read itself from a BodyReader; client and server
// share these, so the two sides cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/hashing.h"
#include "common/status.h"
#include "wire/body_codec.h"
#include "wire/protocol.h"

namespace kvtier::wire {

struct HelloRequest {
  uint32_t version = kProtocolVersion;
  std::string client;
  void Encode(BodyWriter& w) const;
  static Result<HelloRequest> Decode(const BodyReader& r);
};

struct HelloReply {
  uint32_t version = 0;
  std::string server_version;
  uint32_t chunk_size = 0;
  std::string hash;
  uint64_t max_body_bytes = 0;
  uint64_t max_chunks_per_request = 0;
  void Encode(BodyWriter& w) const;
  static Result<HelloReply> Decode(const BodyReader& r);
};

// Where a worker's KV blocks live inside the memfds it handed over. Block b of region r starts at
// regions[r].offset + b * regions[r].block_stride in fd regions[r].fd_index and is block_bytes
// long. vLLM's per-layer [2, num_blocks, block_size, heads, dim] tensor is two regions per layer
// (K and V) with block_stride == block_bytes; a [num_blocks, 2, ...] layout is two regions with
// block_stride == 2 * block_bytes. One cached chunk holds, for every region in order, the
// chunk's blocks in order.
struct KvLayout {
  struct Region {
    uint32_t fd_index = 0;
    uint64_t offset = 0;
    uint64_t block_stride = 0;
  };
  uint32_t num_blocks = 0;
  uint32_t block_tokens = 0;  // tokens per block
  uint64_t block_bytes = 0;   // bytes of one block in one region
  std::vector<Region> regions;

  // Bytes of one chunk object for `chunk_size` tokens.
  uint64_t ObjectBytes(uint32_t chunk_size) const;
  // Checks the layout against the sizes of the mapped fds.
  Status Validate(const std::vector<uint64_t>& fd_sizes, uint32_t chunk_size) const;
  void Encode(BodyWriter& w) const;
  static Result<KvLayout> Decode(const BodyReader& r);
};

// A worker's GPU memory exported with CUDA IPC (cudaIpcGetMemHandle): bytes [offset, offset +
// size) of the allocation `handle` names.
constexpr size_t kGpuHandleBytes = 64;  // cudaIpcMemHandle_t, cudaIpcEventHandle_t
struct GpuBuffer {
  std::string handle;  // 64 bytes
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct RegisterRequest {
  uint64_t instance_id = 0;
  std::string model;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  // From the Unix-socket hand-off: the memfds of a host registration; for a GPU registration a
  // hand-off of no fds, so the server knows (and watches) the worker's process.
  uint64_t fd_token = 0;
  KvLayout layout;  // region fd_index: into the memfds, or into gpu_buffers when there are some
  std::vector<GpuBuffer> gpu_buffers;
  std::string gpu_device;  // the buffers' device UUID (one device per registration)
  std::string gpu_event;   // optional 64-byte IPC event handle STORE waits on before copying
  void Encode(BodyWriter& w) const;
  static Result<RegisterRequest> Decode(const BodyReader& r);
};

// Names a prefix of tokens: either the token ids (the server hashes them) or the chain hashes of
// its full chunks. [start, end) is the token range the request acts on; both chunk-aligned.
struct PrefixKey {
  std::string model;        // LOOKUP only; STORE/RETRIEVE use the registration's model
  uint32_t world_size = 1;  // LOOKUP only
  std::string request_id;   // session id for hash caching and lookup pins
  std::vector<uint32_t> tokens;
  std::vector<ChunkHash> hashes;
  uint64_t start = 0;
  uint64_t end = 0;  // 0 means "all full chunks"
  std::string salt;
  void Encode(BodyWriter& w) const;
  static Result<PrefixKey> Decode(const BodyReader& r);
};

// STORE and RETRIEVE: block_ids cover tokens [0, end) in the worker's registered layout.
struct TransferRequest {
  uint64_t instance_id = 0;
  PrefixKey key;
  std::vector<uint32_t> block_ids;
  uint64_t skip_first_n_tokens = 0;  // RETRIEVE only: leave these tokens' bytes untouched
  void Encode(BodyWriter& w) const;
  static Result<TransferRequest> Decode(const BodyReader& r);
};

struct InstanceRequest {  // UNREGISTER_KV_BUFFERS
  uint64_t instance_id = 0;
  void Encode(BodyWriter& w) const;
  static Result<InstanceRequest> Decode(const BodyReader& r);
};

struct SessionRequest {  // QUERY_PREFETCH_STATUS, FREE_LOOKUP_LOCKS, END_SESSION
  std::string request_id;
  // QUERY_PREFETCH_STATUS only: answer when the job is done, or after this long (a long poll).
  // 0, the default, answers at once; the server cuts longer waits to kMaxStatusWaitUs.
  uint64_t wait_us = 0;
  void Encode(BodyWriter& w) const;
  static Result<SessionRequest> Decode(const BodyReader& r);
};

struct StoreReply {
  uint64_t stored_chunks = 0;   // newly written to L1
  uint64_t present_chunks = 0;  // already cached (or being written by someone else)
  uint64_t skipped_chunks = 0;  // not stored: L1 had no room
  void Encode(BodyWriter& w) const;
  static Result<StoreReply> Decode(const BodyReader& r);
};

struct RetrieveReply {
  uint64_t retrieved_chunks = 0;  // leading chunks of [start, end) copied into the blocks
  void Encode(BodyWriter& w) const;
  static Result<RetrieveReply> Decode(const BodyReader& r);
};

struct PrefetchStatusReply {
  std::optional<uint64_t> hit_chunks;  // nullopt while the job is still running
  void Encode(BodyWriter& w) const;
  static Result<PrefetchStatusReply> Decode(const BodyReader& r);
};

// Every reply body starts with these two fields.
void EncodeStatus(BodyWriter& w, const Status& s);
Status DecodeStatus(const BodyReader& r);

}  // namespace kvtier::wire
