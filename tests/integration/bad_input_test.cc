// Bad input of every kind the issue lists: each gets an error reply with a status and message,
// the server keeps serving, and data stored before is neither lost nor altered.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <zmq.hpp>

#include "server_process.h"
#include "support/child_process.h"
#include "wire/fd_passing.h"
#include "wire/frames.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--chunk-size", "64", "--max-body-bytes", "65536"});
    client_ = server_->Client().release();
    worker_ = new Worker(*client_, 1);
    ASSERT_TRUE(worker_->status.ok());
    worker_->Fill(Blocks(0, 16), 256, 77);
    auto st = client_->Store(worker_->Request(Tokens(256, 77), Blocks(0, 16)));
    ASSERT_TRUE(st.ok() && st->stored_chunks == 4);
  }
  static void TearDownTestSuite() {
    delete worker_;
    delete client_;
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
  }

  // After every bad input: the server answers, and the stored chunks read back unchanged.
  void TearDown() override {
    ASSERT_TRUE(server_->Alive());
    ASSERT_TRUE(client_->Ping().ok());
    const auto other = Blocks(32, 16);
    auto rt = client_->Retrieve(worker_->Request(Tokens(256, 77), other));
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    EXPECT_EQ(rt->retrieved_chunks, 4u);
    EXPECT_EQ(worker_->Mismatches(other, 0, 256, 77), 0u);
  }

  // A raw DEALER socket, for frames the client library would never send.
  struct Raw {
    zmq::context_t ctx{1};
    zmq::socket_t s{ctx, zmq::socket_type::dealer};
    explicit Raw(uint16_t port) {
      s.set(zmq::sockopt::linger, 0);
      s.set(zmq::sockopt::rcvtimeo, 5000);
      s.connect("tcp://127.0.0.1:" + std::to_string(port));
    }
    void Send(const std::vector<std::string>& frames) {
      for (size_t i = 0; i < frames.size(); ++i) {
        s.send(zmq::buffer(frames[i]),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    }
    // Returns the reply's status (id checked when given).
    Status Reply(uint64_t want_id = UINT64_MAX) {
      std::vector<zmq::message_t> parts;
      do {
        zmq::message_t m;
        if (!s.recv(m)) return Status(Code::kTimeout, "no reply");
        parts.push_back(std::move(m));
      } while (parts.back().more());
      EXPECT_EQ(parts.size(), 3u);
      if (want_id != UINT64_MAX) {
        EXPECT_EQ(*wire::DecodeUintFrame(parts[0].data(), parts[0].size()), want_id);
      }
      auto r = wire::BodyReader::Parse(parts[2].data(), parts[2].size());
      EXPECT_TRUE(r.ok());
      return wire::DecodeStatus(*r);
    }
    Status Hello(uint32_t version = wire::kProtocolVersion) {
      wire::HelloRequest h;
      h.version = version;
      Send({wire::EncodeUintFrame(1), wire::EncodeUintFrame(1), EncodeBody(h)});
      return Reply(1);
    }
    Status Request(uint64_t id, wire::RequestType type, const std::string& body) {
      Send({wire::EncodeUintFrame(id), wire::EncodeUintFrame(static_cast<uint64_t>(type)), body});
      return Reply(id);
    }
  };

  static std::string Body(const std::function<void(wire::BodyWriter&)>& fill) {
    wire::BodyWriter w;
    fill(w);
    return w.Finish();
  }

  static ServerProcess* server_;
  static CacheClient* client_;
  static Worker* worker_;
};

ServerProcess* BadInput::server_ = nullptr;
CacheClient* BadInput::client_ = nullptr;
Worker* BadInput::worker_ = nullptr;

#define EXPECT_CODE(status, code_value)                                        \
  do {                                                                         \
    const Status s_ = (status);                                                \
    EXPECT_EQ(s_.code(), code_value) << s_.ToString();                         \
    EXPECT_FALSE(s_.message().empty());                                        \
  } while (0)

TEST_F(BadInput, GarbageSingleFrame) {
  Raw raw(server_->port());
  raw.Send({"\xc1\xff garbage"});
  EXPECT_CODE(raw.Reply(), Code::kProtocolError);
}

TEST_F(BadInput, WrongFrameCounts) {
  Raw raw(server_->port());
  raw.Send({wire::EncodeUintFrame(5), wire::EncodeUintFrame(10)});
  EXPECT_CODE(raw.Reply(5), Code::kProtocolError);
  raw.Send({wire::EncodeUintFrame(6), wire::EncodeUintFrame(10), "a", "b", "c"});
  EXPECT_CODE(raw.Reply(6), Code::kProtocolError);
}

TEST_F(BadInput, IdFrameThatIsNotAnInteger) {
  Raw raw(server_->port());
  raw.Send({"\xa3" "abc", wire::EncodeUintFrame(10), Body([](auto&) {})});
  EXPECT_CODE(raw.Reply(), Code::kProtocolError);
}

TEST_F(BadInput, RequestsBeforeHello) {
  Raw raw(server_->port());
  EXPECT_CODE(raw.Request(2, wire::RequestType::kStats, Body([](auto&) {})),
              Code::kProtocolError);
  // PING is allowed before HELLO (health checks).
  EXPECT_TRUE(raw.Request(3, wire::RequestType::kPing, Body([](auto&) {})).ok());
}

TEST_F(BadInput, UnknownRequestType) {
  Raw raw(server_->port());
  ASSERT_TRUE(raw.Hello().ok());
  raw.Send({wire::EncodeUintFrame(7), wire::EncodeUintFrame(99), Body([](auto&) {})});
  EXPECT_CODE(raw.Reply(7), Code::kUnknownRequest);
}

TEST_F(BadInput, BodyThatIsNotMsgpack) {
  Raw raw(server_->port());
  ASSERT_TRUE(raw.Hello().ok());
  EXPECT_CODE(raw.Request(8, wire::RequestType::kStats, "\xc1\xc1\xc1"), Code::kProtocolError);
  EXPECT_CODE(raw.Request(9, wire::RequestType::kStats, "\x93\x01\x02\x03"),  // array, not map
              Code::kProtocolError);
  // A map that claims 2^32-1 entries in 5 bytes must not make the server allocate them.
  EXPECT_CODE(raw.Request(10, wire::RequestType::kStats, std::string("\xdf\xff\xff\xff\xff", 5)),
              Code::kProtocolError);
}

TEST_F(BadInput, WrongFieldTypes) {
  Raw raw(server_->port());
  ASSERT_TRUE(raw.Hello().ok());
  EXPECT_CODE(raw.Request(11, wire::RequestType::kStore,
                          Body([](auto& w) { w.Put("instance_id", "one"); })),
              Code::kInvalidArgument);
  EXPECT_CODE(raw.Request(12, wire::RequestType::kQueryPrefetchStatus,
                          Body([](auto& w) { w.Put("request_id", uint64_t{5}); })),
              Code::kInvalidArgument);
  wire::BodyWriter key;
  key.Put("tokens", "not tokens");
  EXPECT_CODE(raw.Request(13, wire::RequestType::kLookup,
                          Body([&](auto& w) { w.PutMap("key", key).Put("model", "m"); })),
              Code::kInvalidArgument);
}

TEST_F(BadInput, BlockIdsOutsideTheLayout) {
  auto req = worker_->Request(Tokens(128, 1), Blocks(0, 8));
  req.block_ids[5] = Worker::kBlocks;  // one past the end
  EXPECT_CODE(client_->Store(req).status(), Code::kOutOfRange);
  EXPECT_CODE(client_->Retrieve(req).status(), Code::kOutOfRange);
}

TEST_F(BadInput, TooFewBlockIds) {
  EXPECT_CODE(client_->Store(worker_->Request(Tokens(128, 1), Blocks(0, 7))).status(),
              Code::kInvalidArgument);
}

TEST_F(BadInput, ChunkThatIsNotFull) {
  auto req = worker_->Request(Tokens(100, 1), Blocks(0, 8));
  req.key.end = 100;
  EXPECT_CODE(client_->Store(req).status(), Code::kInvalidArgument);
  // Fewer tokens than one chunk: nothing to cache, and the client is told so.
  EXPECT_CODE(client_->Store(worker_->Request(Tokens(40, 1), Blocks(0, 8))).status(),
              Code::kInvalidArgument);
}

TEST_F(BadInput, UnregisteredWorker) {
  auto req = worker_->Request(Tokens(128, 1), Blocks(0, 8));
  req.instance_id = 424242;
  EXPECT_CODE(client_->Store(req).status(), Code::kNotRegistered);
  EXPECT_CODE(client_->UnregisterKvBuffers(424242), Code::kNotRegistered);
}

TEST_F(BadInput, FrameOverTheSizeLimit) {
  Raw raw(server_->port());
  ASSERT_TRUE(raw.Hello().ok());
  std::string big(70000, 'x');
  EXPECT_CODE(raw.Request(14, wire::RequestType::kStats, Body([&](auto& w) { w.Put("pad", big); })),
              Code::kTooLarge);
}

TEST_F(BadInput, ClientDisconnectsMidRequest) {
  for (int i = 0; i < 5; ++i) {
    Raw raw(server_->port());
    ASSERT_TRUE(raw.Hello().ok());
    raw.Send({wire::EncodeUintFrame(15), wire::EncodeUintFrame(4),
              EncodeBody(worker_->Request(Tokens(256, 900 + i), Blocks(0, 16)))});
    // Socket closes here with the STORE in flight; its reply has nowhere to go.
  }
}

TEST_F(BadInput, HelloWithAnotherVersion) {
  Raw raw(server_->port());
  EXPECT_CODE(raw.Hello(wire::kProtocolVersion + 1), Code::kVersionMismatch);
  ASSERT_TRUE(raw.Hello().ok());
  EXPECT_CODE(raw.Hello(wire::kProtocolVersion + 1), Code::kVersionMismatch);
  EXPECT_TRUE(raw.Request(16, wire::RequestType::kStats, Body([](auto&) {})).ok());
}

TEST_F(BadInput, LookupOfUnknownSession) {
  EXPECT_CODE(client_->QueryPrefetchStatus("never-seen").status(), Code::kNotFound);
  EXPECT_CODE(client_->FreeLookupLocks("never-seen"), Code::kNotFound);
}

TEST_F(BadInput, RegisterWithUnknownTokenOrBadLayout) {
  wire::RegisterRequest req;
  req.instance_id = 9;
  req.model = "m";
  req.fd_token = 12345;
  req.layout = worker_->layout;
  EXPECT_CODE(client_->Call(wire::RequestType::kRegisterKvBuffers, EncodeBody(req)).status(),
              Code::kNotFound);
  // A layout larger than the buffer handed over.
  auto small = MappedFile::Create("small", 4096, false, false);
  int fd = small->fd();
  EXPECT_CODE(client_->RegisterKvBuffers(9, "m", 1, 0, {&fd, 1}, worker_->layout),
              Code::kOutOfRange);
}

TEST_F(BadInput, FdHandoffGarbageAndForeignUid) {
  auto sock = wire::ConnectAbstract(wire::UdsNameForPort(server_->port()));
  ASSERT_TRUE(sock.ok());
  ASSERT_TRUE(wire::SendWithFds(sock->get(), "nonsense", 8, {}).ok());
  char buf[256];
  std::vector<wire::UniqueFd> none;
  auto n = wire::RecvWithFds(sock->get(), buf, sizeof(buf), none);
  ASSERT_TRUE(n.ok());
  uint32_t code;
  std::memcpy(&code, buf, 4);
  EXPECT_EQ(static_cast<Code>(code), Code::kProtocolError);

  // A process of another user is refused before it can hand over anything.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch uid";
  ChildProcess foreign = ChildProcess::Fork([&] {
    if (::setuid(65534) != 0) return 3;
    auto f = MappedFile::Create("foreign", 4096, false, false);
    int fd = f->fd();
    auto token = wire::HandOffFds(wire::UdsNameForPort(server_->port()), {&fd, 1});
    if (!token.ok() && token.status().code() == Code::kPermissionDenied) return 0;
    std::fprintf(stderr, "foreign hand-off: %s\n", token.status().ToString().c_str());
    return 4;
  });
  EXPECT_EQ(foreign.Wait(std::chrono::seconds(60)), 0);
}

// A buffer its owner could shrink would crash the server at the next copy (SIGBUS): only memfds
// sealed against shrinking are accepted, and the server goes on serving.
TEST_F(BadInput, FdHandoffRefusesBuffersThatCouldShrink) {
  const int unsealed = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 1 << 16), 0);
  auto token = wire::HandOffFds(wire::UdsNameForPort(server_->port()), {&unsealed, 1});
  EXPECT_EQ(token.status().code(), Code::kInvalidArgument) << token.status().ToString();
  EXPECT_NE(token.status().message().find("F_SEAL_SHRINK"), std::string::npos)
      << token.status().ToString();
  ::close(unsealed);

  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(::ftruncate(::fileno(file), 1 << 16), 0);
  const int file_fd = ::fileno(file);
  token = wire::HandOffFds(wire::UdsNameForPort(server_->port()), {&file_fd, 1});
  EXPECT_EQ(token.status().code(), Code::kInvalidArgument) << token.status().ToString();
  EXPECT_NE(token.status().message().find("not a sealable memfd"), std::string::npos)
      << token.status().ToString();
  std::fclose(file);

  auto sealed = MappedFile::Create("sealed", 1 << 16, false, false);
  ASSERT_TRUE(sealed.ok());
  const int ok_fd = sealed->fd();
  EXPECT_TRUE(wire::HandOffFds(wire::UdsNameForPort(server_->port()), {&ok_fd, 1}).ok());
}

}  // namespace
}  // namespace kvtier::testing
