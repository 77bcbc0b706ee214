// A real redis-server for tests: started on 127.0.0.1 with a free port, no persistence, in its own
// temp dir, and stopped by PID. Header-only so any test binary can use it
// (`#include "support/redis_process.h"`, tests/ is the include root).
//
// Start() must be called from a thread that lives as long as the server: the child asks the kernel
// to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no redis behind.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "support/logged_server.h"

namespace kvtier::testing {

class RedisProcess : public LoggedServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";

  // Starts redis-server on `port` (a free one when 0), with `--requirepass password` when not
  // empty and `extra_args` last (e.g. cluster options; relative paths are in the server's temp
  // dir), and waits (at most 10 s) until it answers. Returns nullptr on failure, after printing
  // the reason and the tail of redis's log to stderr.
  static std::unique_ptr<RedisProcess> Start(uint16_t port = 0, const std::string& password = "",
                                             std::vector<std::string> extra_args = {}) {
    std::unique_ptr<RedisProcess> r(new RedisProcess(password));
    r->extra_args_ = std::move(extra_args);
    if (!r->MakeTempDir()) return nullptr;
    // An automatically chosen port can be taken by someone else between our probe and redis's
    // bind; then redis exits at once and we try another one.
    const int attempts = port == 0 ? 5 : 1;
    for (int i = 0; i < attempts; ++i) {
      r->port_ = port != 0 ? port : FreeLoopbackPort();
      if (r->port_ != 0 && r->Spawn() && r->WaitReady()) return r;
      r->Kill();
    }
    r->Report("redis-server did not start", r->Port());
    return nullptr;
  }

  uint16_t port() const { return port_; }
  const std::string& password() const { return password_; }

  // Starts a fresh server on the same port (the old one is killed first if still running; its
  // data is gone) and waits until it answers.
  bool Restart() {
    Kill();
    if (Spawn() && WaitReady()) return true;
    Kill();
    Report("redis-server did not restart", Port());
    return false;
  }

 private:
  explicit RedisProcess(std::string password)
      : LoggedServer("RedisProcess", "redis.log"), password_(std::move(password)) {}

  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return addr;
  }

  bool Spawn() {
    std::vector<std::string> args = {kBinary,
                                     "--port", std::to_string(port_),
                                     "--bind", "127.0.0.1",
                                     "--save", "",
                                     "--appendonly", "no",
                                     "--daemonize", "no",
                                     "--dir", dir_,  // logs go to stdout = redis.log
                                     "--loglevel", "warning"};
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    return LoggedServer::Spawn(std::move(args));
  }

  // Polls until our child answers on the port (it exits, or 10 s pass, otherwise). The answer
  // must name our child's pid: another server that grabbed the port in a race does not count.
  bool WaitReady() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (Exited()) return false;
      if (AnswersAsOurs()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  static std::string Command(std::initializer_list<std::string> words) {
    std::string out = "*" + std::to_string(words.size()) + "\r\n";
    for (const auto& w : words) out += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
    return out;
  }

  // [AUTH password] INFO server, and looks for "process_id:<our pid>" in the reply.
  bool AnswersAsOurs() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr = Loopback(port_);
    std::string req = password_.empty() ? "" : Command({"AUTH", password_});
    req += Command({"INFO", "server"});
    const std::string want = "process_id:" + std::to_string(pid_) + "\r\n";
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      std::string got;
      char buf[4096];
      pollfd p{fd, POLLIN, 0};
      while (!ok && got.size() < 65536 && ::poll(&p, 1, 1000) == 1) {
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
        ok = got.find(want) != std::string::npos;
      }
    }
    ::close(fd);
    return ok;
  }

  std::string Port() const { return "port " + std::to_string(port_); }

  std::string password_;
  std::vector<std::string> extra_args_;
  uint16_t port_ = 0;
};

}  // namespace kvtier::testing
