// A real redis-server for tests: started on 127.0.0.1 with a free port, no persistence, in its own
// temp dir, and stopped by PID. Header-only so any test binary can use it
// (`#include "support/redis_process.h"`, tests/ is the include root).
//
// Start() must be called from a thread that lives as long as the server: the child asks the kernel
// to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no redis behind.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/free_port.h"

namespace kvtier::testing {

class RedisProcess {
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
      r->port_ = port != 0 ? port : bench::FreeLoopbackPort();
      if (r->port_ != 0 && r->Spawn() && r->WaitReady()) return r;
      r->Kill();
    }
    r->Report("redis-server did not start");
    return nullptr;
  }

  ~RedisProcess() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& password() const { return password_; }
  std::string log_path() const { return dir_ + "/redis.log"; }

  // SIGKILL and reap: the server vanishes as in a crash (clients see resets).
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    Reap();
  }

  // SIGTERM (and SIGCONT, in case a test stopped it); SIGKILL if still alive after 5 s.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::kill(pid_, SIGCONT);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Kill();
  }

  // Starts a fresh server on the same port (the old one is killed first if still running; its
  // data is gone) and waits until it answers.
  bool Restart() {
    Kill();
    if (Spawn() && WaitReady()) return true;
    Kill();
    Report("redis-server did not restart");
    return false;
  }

 private:
  explicit RedisProcess(std::string password) : password_(std::move(password)) {}

  static sockaddr_in Loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return addr;
  }

  bool MakeTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                       "/kvtier-redis-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "RedisProcess: mkdtemp(%s): %s\n", tmpl.c_str(), std::strerror(errno));
      return false;
    }
    dir_ = tmpl;
    return true;
  }

  // fork + exec. Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the test process may have other threads).
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
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_path();
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "RedisProcess: fork: %s\n", std::strerror(errno));
      return false;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);  // the parent is already gone
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      int null = ::open("/dev/null", O_RDONLY);
      if (fd < 0 || null < 0) ::_exit(126);
      ::dup2(null, 0);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      // Close every inherited descriptor (sockets, eventfds of the test) so the server does not
      // keep them open; fall back to a loop where close_range is missing.
      if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int i = 3; i < 65536; ++i) ::close(i);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    return true;
  }

  // Polls until our child answers on the port (it exits, or 10 s pass, otherwise). The answer
  // must name our child's pid: another server that grabbed the port in a race does not count.
  bool WaitReady() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (pid_ <= 0 || ::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        return false;
      }
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

  void Reap() {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = 0;
  }

  void Report(const char* what) const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string log = ss.str();
    if (log.size() > 2000) log = log.substr(log.size() - 2000);
    std::fprintf(stderr, "RedisProcess: %s (port %u); log tail:\n%s\n", what,
                 static_cast<unsigned>(port_), log.c_str());
  }

  std::string password_;
  std::vector<std::string> extra_args_;
  std::string dir_;
  uint16_t port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace kvtier::testing
