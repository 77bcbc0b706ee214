// A real single-member etcd for tests: client and peer ports on 127.0.0.1 (free ones), data in
// its own temp dir, stopped by PID. Header-only, like redis_process.h
// (`#include "support/etcd_process.h"`, tests/ is the include root); needs cpp-httplib, which
// every test binary gets through kvt_common.
//
// Start() must be called from a thread that lives as long as the server: the child asks the kernel
// to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no etcd behind.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/free_port.h"

namespace kvtier::testing {

class EtcdProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  static bool Available() { return ::access(kBinary, X_OK) == 0; }

  // Starts etcd and waits (at most 20 s) until it has elected itself leader and answers as our
  // child. Returns nullptr on failure, after printing the reason and the tail of etcd's log.
  static std::unique_ptr<EtcdProcess> Start() {
    std::unique_ptr<EtcdProcess> e(new EtcdProcess());
    if (!e->MakeTempDir()) return nullptr;
    // A chosen port can be taken by someone else between our probe and etcd's bind; then etcd
    // exits at once and we try other ones.
    for (int i = 0; i < 5; ++i) {
      e->port_ = bench::FreeLoopbackPort();
      e->peer_port_ = bench::FreeLoopbackPort();
      if (e->port_ != 0 && e->peer_port_ != 0 && e->Spawn() && e->WaitReady()) return e;
      e->Kill();
    }
    e->Report("etcd did not start");
    return nullptr;
  }

  ~EtcdProcess() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log_path() const { return dir_ + "/etcd.log"; }

  // SIGKILL and reap: the server vanishes as in a crash.
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

 private:
  EtcdProcess() = default;

  bool MakeTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kvtier-etcd-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "EtcdProcess: mkdtemp(%s): %s\n", tmpl.c_str(), std::strerror(errno));
      return false;
    }
    dir_ = tmpl;
    return true;
  }

  // A member name no other etcd has: the readiness check looks for it in the member list.
  std::string Name() const {
    return "kvtier-test-" + std::to_string(::getpid()) + "-" + std::to_string(port_);
  }

  // fork + exec. Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the test process may have other threads).
  bool Spawn() {
    const std::string client = "http://127.0.0.1:" + std::to_string(port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    // A fresh data dir per attempt: a member that failed to start may have left one behind.
    const std::string data = dir_ + "/data-" + std::to_string(port_);
    // clang-format off
    std::vector<std::string> args = {kBinary,
        "--name", Name(),
        "--data-dir", data,
        "--listen-client-urls", client,
        "--advertise-client-urls", client,
        "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer,
        "--initial-cluster", Name() + "=" + peer,
        "--initial-cluster-token", Name(),
        "--logger", "zap",  // --log-level needs it in etcd 3.4
        "--log-outputs", "stderr",
        "--log-level", "error"};
    // clang-format on
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_path();
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "EtcdProcess: fork: %s\n", std::strerror(errno));
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
      // Close every inherited descriptor so the server does not keep the test's sockets open.
      if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int i = 3; i < 65536; ++i) ::close(i);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    return true;
  }

  // Polls until our child is healthy (it has a leader: itself) and its member list names it; an
  // etcd of someone else that grabbed the port in a race does not count.
  bool WaitReady() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (pid_ <= 0 || ::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        return false;
      }
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(std::chrono::milliseconds(500));
      c.set_read_timeout(std::chrono::seconds(2));
      auto health = c.Get("/health");
      if (health && health->status == 200 && health->body.find("\"true\"") != std::string::npos) {
        auto members = c.Post("/v3/cluster/member/list", "{}", "application/json");
        if (members && members->status == 200 &&
            members->body.find("\"" + Name() + "\"") != std::string::npos) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
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
    std::fprintf(stderr, "EtcdProcess: %s (ports %u, %u); log tail:\n%s\n", what,
                 static_cast<unsigned>(port_), static_cast<unsigned>(peer_port_), log.c_str());
  }

  std::string dir_;
  uint16_t port_ = 0;
  uint16_t peer_port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace kvtier::testing
