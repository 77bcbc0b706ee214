// The TCP listener through which other nodes read and write this node's segment. Each request
// names the segment (its id must be this node's: a descriptor of a predecessor at the same
// address is refused, SEGMENT_NOT_FOUND), an offset and a length that must lie inside the
// segment; the bytes are received straight into / sent straight from segment memory. Bad
// requests get an error reply and the connection keeps serving; a peer that disconnects
// mid-request costs only its own connection.
// The wire format is in docs/store/data_plane.md.
// Thread-safety: Start and Stop are the owner's; after Start, Port() may be called from any
// thread. Connections are served on threads of the server's own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/metrics.h"
#include "common/status.h"
#include "store/transport/segment_gate.h"

namespace kvtier::store {

struct DataPlaneOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: pick a free port (see Port())
  uint8_t* segment = nullptr;
  uint64_t segment_size = 0;
  uint64_t segment_id = 0;  // READ/WRITE must name it (the id the master hands out for it)
  std::string auth_token;   // when not empty, a connection must prove it first (AUTH, PROOF)
  // Which segment id is served now, shared with the node's transfer engine (segment_gate.h);
  // null: a gate of this server's own over segment_id.
  std::shared_ptr<SegmentGate> gate;
  // A master's RECORDS and REPORT (docs/store/failover.md): `op` the dp::Op's value, `cursor` a
  // REPORT's; answers the reply's payload, or an error. Called only for a request naming the
  // served segment, of a term not older than the latest seen. Null: both are refused.
  std::function<Result<std::string>(uint8_t op, uint64_t cursor, std::string_view payload)> records;
};

class DataPlaneServer {
 public:
  DataPlaneServer(DataPlaneOptions options, MetricsRegistry* metrics);
  ~DataPlaneServer();  // Stop()

  Status Start();
  void Stop();  // closes the listener and every connection, joins
  uint16_t Port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
