// The cache server under fault injection: a real `kvtier server` ($KVTIER_BIN) whose stderr goes
// to a log file the test reads, its /status and /metrics and RSS, a raw DEALER for clients that
// misbehave, and KV blocks filled with checksummed values (checksummed_value.h): every block a
// test stores names its prompt, chunk, region and block, and every block read back is verified.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/free_port.h"
#include "common/process/kvtier_launchers.h"
#include "common/process/readiness.h"
#include "fault/checksummed_value.h"
#include "integration/prompt_round_trip.h"
#include "integration/worker_fixture.h"
#include "support/child_process.h"
#include "wire/frames.h"

namespace kvtier::fault {

using testing::ChildProcess;
using testing::Worker;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `done` every 20 ms until it holds or `limit` passes.
inline bool WaitUntil(const std::function<bool()>& done, milliseconds limit = seconds(30)) {
  return process::WaitFor(done, limit, milliseconds(20));
}

inline milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kvtier-fault-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

class FaultServer {
 public:
  // Starts `kvtier server` on free ports with a 64 MiB L1, then `args`, and waits until it says
  // it is listening (throws, with its log tail, if it does not within 30 s).
  explicit FaultServer(std::vector<std::string> args) {
    process::KvtierSpec spec;
    spec.binary = process::KvtierBinFromEnv();
    if (spec.binary.empty()) throw std::runtime_error("KVTIER_BIN is not set");
    spec.args = {"--l1-size-gb", "0.0625", "--no-l1-prefault", "--chunk-size",
                 std::to_string(testing::kChunkTokens), "--log-level", "warn"};
    spec.args.insert(spec.args.end(), args.begin(), args.end());
    spec.log_path = log_path();
    spec.capture_stdout = false;  // the log holds what it writes to stderr
    spec.deadline = seconds(30);
    auto launched = process::LaunchServer(spec);
    if (!launched.ok()) {
      throw std::runtime_error("kvtier server did not come up: " + launched.status().ToString());
    }
    port_ = launched->port(0);
    http_port_ = launched->port(1);
    proc_ = ChildProcess(std::move(launched->child()));
  }
  ~FaultServer() { Stop(); }

  int Stop() { return proc_.Stop(); }
  void Kill() { proc_.Kill(); }  // as a crash would: nothing flushed or cleaned up
  bool Alive() { return proc_.Alive(); }
  pid_t pid() const { return proc_.pid(); }
  uint16_t port() const { return port_; }

  ClientOptions Options() const {
    ClientOptions o;
    o.port = port_;
    o.timeout = seconds(20);
    return o;
  }
  std::unique_ptr<CacheClient> Client() const {
    auto c = CacheClient::Connect(Options());
    if (!c.ok()) throw std::runtime_error("connect: " + c.status().ToString());
    return std::move(c).value();
  }

  std::string Http(const std::string& path) const {
    httplib::Client c("127.0.0.1", http_port_);
    c.set_read_timeout(10, 0);
    auto r = c.Get(path);
    return r && r->status == 200 ? r->body : "";
  }
  nlohmann::json Status() const {
    return nlohmann::json::parse(Http("/status"), nullptr, false);
  }
  // Adapter `i`'s counter `field` of operation `op` ("write", "lookup", "load") from /status.
  uint64_t L2Count(size_t i, const char* op, const char* field) const {
    auto j = Status();
    if (!j.is_object() || !j.contains("l2") || j["l2"].size() <= i) return 0;
    return j["l2"][i][op][field].get<uint64_t>();
  }
  bool L2Up(size_t i) const {
    auto j = Status();
    return j.is_object() && j.contains("l2") && j["l2"].size() > i && j["l2"][i]["up"].get<bool>();
  }
  // One series of /metrics, labels included as rendered (e.g. `x{adapter="fs#0"}`); -1 if absent.
  double Metric(const std::string& series) const {
    const std::string text = Http("/metrics");
    for (size_t pos = 0; (pos = text.find(series + " ", pos)) != std::string::npos;
         pos += series.size()) {
      if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    }
    return -1;
  }

  // What the server wrote to stderr so far.
  std::string Log() const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Resident set size in KiB (VmRSS of /proc/<pid>/status); 0 if unknown.
  uint64_t RssKib() const {
    std::ifstream in("/proc/" + std::to_string(pid()) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    }
    return 0;
  }

 private:
  std::string log_path() const { return (dir_.path / "server.log").string(); }

  TempDir dir_;
  uint16_t port_ = 0;
  uint16_t http_port_ = 0;
  ChildProcess proc_;
};

// --- Checksummed KV blocks. A prompt's 4 chunks live in blocks 0..15 of the worker (4 each). ---

inline constexpr uint32_t kBlocksPerChunk = testing::kChunkTokens / Worker::kBlockTokens;

inline std::string BlockKey(uint32_t prompt, uint64_t chunk, size_t region, uint32_t block) {
  return "prompt " + std::to_string(prompt) + " chunk " + std::to_string(chunk) + " region " +
         std::to_string(region) + " block " + std::to_string(block);
}

inline std::span<uint8_t> BlockBytes(Worker& w, size_t region, uint32_t block) {
  return {w.TokenBytes(region, block, 0), w.layout.block_bytes};
}

inline void FillChecksummed(Worker& w, uint32_t prompt) {
  for (uint64_t c = 0; c < testing::kPromptChunks; ++c) {
    for (size_t r = 0; r < w.layout.regions.size(); ++r) {
      for (uint32_t b = 0; b < kBlocksPerChunk; ++b) {
        const auto v = MakeValue(BlockKey(prompt, c, r, b), w.layout.block_bytes);
        std::memcpy(BlockBytes(w, r, c * kBlocksPerChunk + b).data(), v.data(), v.size());
      }
    }
  }
}

// "" when chunks [0, chunks) of `prompt` in the worker's blocks are intact; else the first fault.
inline std::string CheckChunks(Worker& w, uint32_t prompt, uint64_t chunks) {
  for (uint64_t c = 0; c < chunks; ++c) {
    for (size_t r = 0; r < w.layout.regions.size(); ++r) {
      for (uint32_t b = 0; b < kBlocksPerChunk; ++b) {
        const std::string key = BlockKey(prompt, c, r, b);
        const std::string bad = CheckValue(key, BlockBytes(w, r, c * kBlocksPerChunk + b));
        if (!bad.empty()) return key + ": " + bad;
      }
    }
  }
  return "";
}

// STORE of `prompt` (tokens Tokens(256, prompt)); the chunks L1 took, -1 on an error.
inline int64_t StoreChecksummed(CacheClient& c, Worker& w, uint32_t prompt) {
  FillChecksummed(w, prompt);
  auto st = c.Store(w.Request(testing::Tokens(testing::kPromptTokens, prompt),
                              testing::Blocks(0, 16)));
  return st.ok() ? static_cast<int64_t>(st->stored_chunks) : -1;
}

// LOOKUP then RETRIEVE of `prompt` into zeroed blocks. Returns the chunks retrieved (-1 on an
// error reply); every retrieved block must check out, or the test fails.
inline int64_t FetchChecksummed(CacheClient& c, Worker& w, uint32_t prompt,
                                const std::string& rid) {
  const auto tokens = testing::Tokens(testing::kPromptTokens, prompt);
  const int64_t hits = testing::LookupHits(c, rid, tokens);
  if (hits < 0) return -1;
  w.Zero();
  auto rt = c.Retrieve(w.Request(tokens, testing::Blocks(0, 16), rid));
  if (!rt.ok()) return -1;
  EXPECT_EQ(static_cast<int64_t>(rt->retrieved_chunks), hits) << rid;
  const std::string bad = CheckChunks(w, prompt, rt->retrieved_chunks);
  EXPECT_EQ(bad, "") << "corrupted read of " << rid;
  return static_cast<int64_t>(rt->retrieved_chunks);
}

// A raw DEALER for clients the library would never be: ones that pipeline without waiting, or
// stop reading. Requests get ids from 1 up.
class RawClient {
 public:
  // `receive_buffer` > 0: a small kernel receive buffer and ZMQ receive queue, so that a client
  // that stops reading pushes back on the server after few replies.
  explicit RawClient(uint16_t port, int receive_buffer = 0) {
    s_.set(zmq::sockopt::linger, 0);
    s_.set(zmq::sockopt::sndhwm, 0);  // never block the sender: the server must cope
    if (receive_buffer > 0) {
      s_.set(zmq::sockopt::rcvbuf, receive_buffer);
      s_.set(zmq::sockopt::rcvhwm, 100);
    }
    s_.connect("tcp://127.0.0.1:" + std::to_string(port));
  }

  uint64_t Send(wire::RequestType type, const std::string& body) {
    const uint64_t id = next_id_++;
    s_.send(zmq::buffer(wire::EncodeUintFrame(id)), zmq::send_flags::sndmore);
    s_.send(zmq::buffer(wire::EncodeUintFrame(static_cast<uint64_t>(type))),
            zmq::send_flags::sndmore);
    s_.send(zmq::buffer(body), zmq::send_flags::none);
    return id;
  }

  struct Reply {
    uint64_t id = 0;
    kvtier::Status status;
    std::string body;  // the whole reply body, for its fields
  };
  // The next reply, or nullopt after `timeout` without one.
  std::optional<Reply> Receive(milliseconds timeout) {
    s_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t m;
      if (!s_.recv(m)) return std::nullopt;
      parts.push_back(std::move(m));
    } while (parts.back().more());
    if (parts.size() != 3) return Reply{0, {Code::kProtocolError, "reply of wrong shape"}, {}};
    Reply r;
    r.id = wire::DecodeUintFrame(parts[0].data(), parts[0].size()).value();
    auto body = wire::BodyReader::Parse(parts[2].data(), parts[2].size());
    r.status = body.ok() ? wire::DecodeStatus(*body) : body.status();
    r.body = parts[2].to_string();
    return r;
  }

  // HELLO's own reply (replies to earlier requests still queued are read and skipped), or
  // kTimeout when none came within `timeout`.
  kvtier::Status Hello(milliseconds timeout = seconds(10)) {
    wire::HelloRequest h;
    h.client = "fault-raw";
    const uint64_t id = Send(wire::RequestType::kHello, EncodeBody(h));
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto r = Receive(std::chrono::duration_cast<milliseconds>(
          until - std::chrono::steady_clock::now() + milliseconds(1)));
      if (!r) break;
      if (r->id == id) return r->status;
    }
    return kvtier::Status(Code::kTimeout, "no HELLO reply");
  }

  static std::string LookupBody(const std::string& request_id, uint32_t prompt) {
    wire::PrefixKey k;
    k.model = "test-model";
    k.request_id = request_id;
    k.tokens = testing::Tokens(testing::kPromptTokens, prompt);
    return EncodeBody(k);
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t s_{ctx_, zmq::socket_type::dealer};
  uint64_t next_id_ = 1;
};

}  // namespace kvtier::fault
