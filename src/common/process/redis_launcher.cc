// Launching redis-server (redis_launcher.h).
#include "common/process/redis_launcher.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <initializer_list>

#include "common/process/readiness.h"

namespace kvtier::process {

namespace {

std::string Command(std::initializer_list<std::string> words) {
  std::string out = "*" + std::to_string(words.size()) + "\r\n";
  for (const auto& w : words) out += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
  return out;
}

}  // namespace

bool RedisAnswersAs(uint16_t port, const std::string& password, pid_t pid) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  std::string req = password.empty() ? "" : Command({"AUTH", password});
  req += Command({"INFO", "server"});
  const std::string want = "process_id:" + std::to_string(pid) + "\r\n";
  bool ok = false;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    std::string got;
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (!ok && got.size() < 65536 && ::poll(&p, 1, 1000) == 1) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      ok = got.find(want) != std::string::npos;
    }
  }
  ::close(fd);
  return ok;
}

Result<Launched> LaunchRedis(const RedisSpec& spec) {
  if (spec.dir.empty()) return Status(Code::kInvalidArgument, "redis: no directory given");
  LaunchSpec l;
  l.name = "redis-server";
  l.ports = {spec.port};
  if (spec.cluster_port) l.ports.push_back(*spec.cluster_port);
  l.argv = [spec](const std::vector<uint16_t>& ports) {
    std::vector<std::string> argv = {spec.binary,
                                     "--port",
                                     std::to_string(ports[0]),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--daemonize",
                                     "no",
                                     "--dir",
                                     spec.dir,
                                     "--loglevel",
                                     "warning"};
    if (!spec.password.empty()) argv.insert(argv.end(), {"--requirepass", spec.password});
    if (ports.size() > 1) argv.insert(argv.end(), {"--cluster-port", std::to_string(ports[1])});
    argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
    return argv;
  };
  l.ready = [password = spec.password](const Child& c, const std::vector<uint16_t>& ports) {
    return RedisAnswersAs(ports[0], password, c.pid());
  };
  l.log_path = spec.log_path;
  l.deadline = spec.deadline;
  l.attempts = 5;
  return Launch(l);
}

}  // namespace kvtier::process
