// HttpPost: a non-blocking socket, poll() against one deadline, and a parser for the answer.
#include "common/http_post.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace kvtier {
namespace {

using SteadyClock = std::chrono::steady_clock;

bool WaitFor(int fd, short events, SteadyClock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - SteadyClock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// A connected non-blocking socket, or -1 with `error` set. Tries every address of `host`.
int Connect(const std::string& host, int port, SteadyClock::time_point deadline,
            std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list)) {
    *error = std::string("resolve: ") + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = list; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    int err = fd < 0 ? errno : ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      err = ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (WaitFor(fd, POLLOUT, deadline)) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      *error = std::string("connect: ") + std::strerror(err);
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(list);
  return fd;
}

// Sends the request and reads until EOF; false with `error` set otherwise.
bool Exchange(int fd, const std::string& request, SteadyClock::time_point deadline,
              std::chrono::milliseconds timeout, std::string* raw, std::string* error) {
  for (size_t off = 0; off < request.size();) {
    if (!WaitFor(fd, POLLOUT, deadline)) {
      *error = "send: timed out after " + std::to_string(timeout.count()) + " ms";
      return false;
    }
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      *error = std::string("send: ") + std::strerror(errno);
      return false;
    }
    if (n > 0) off += static_cast<size_t>(n);
  }
  char buf[16384];
  while (true) {
    if (!WaitFor(fd, POLLIN, deadline)) {
      *error = "no answer within " + std::to_string(timeout.count()) + " ms";
      return false;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      *error = std::string("recv: ") + std::strerror(errno);
      return false;
    }
    if (n > 0) raw->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

HttpPostResult HttpPost(const std::string& host, int port, const std::string& path,
                        const std::string& body, const std::string& content_type,
                        std::chrono::milliseconds timeout) {
  HttpPostResult out;
  const auto deadline = SteadyClock::now() + timeout;
  const int fd = Connect(host, port, deadline, &out.error);
  if (fd < 0) return out;
  out.sent = true;  // from here on the server may have seen (and acted on) the request
  const std::string request = "POST " + path + " HTTP/1.1\r\nHost: " + host + ":" +
                              std::to_string(port) + "\r\nContent-Type: " + content_type +
                              "\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\nConnection: close\r\n\r\n" + body;
  std::string raw;
  const bool done = Exchange(fd, request, deadline, timeout, &raw, &out.error);
  ::close(fd);
  if (!done) return out;
  HttpPostResult parsed = ParseHttpAnswer(raw);
  parsed.sent = true;
  return parsed;
}

HttpPostResult ParseHttpAnswer(const std::string& raw) {
  HttpPostResult out;
  const size_t head_end = raw.find("\r\n\r\n");
  const size_t space = raw.find(' ');
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || space > head_end ||
      std::from_chars(raw.data() + space + 1, raw.data() + head_end, out.status).ec !=
          std::errc()) {
    out.error = "not an HTTP answer";
    return out;
  }
  std::string head = raw.substr(0, head_end + 2);  // every header line ends in \r\n
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  size_t pos = head_end + 4;
  if (head.find("\r\ntransfer-encoding: chunked\r\n") == std::string::npos) {
    out.body = raw.substr(pos);
    out.answered = true;
    return out;
  }
  // Chunks: "<hex size>[;ext]\r\n<data>\r\n", ending with size 0 (and maybe a trailer).
  while (true) {
    size_t len = 0;
    const char* size_at = raw.data() + pos;
    const auto [size_end, ec] = std::from_chars(size_at, raw.data() + raw.size(), len, 16);
    const size_t eol = raw.find("\r\n", pos);
    if (ec != std::errc() || eol == std::string::npos || size_end > raw.data() + eol ||
        raw.size() - (eol + 2) < len) {
      out.error = "truncated or malformed chunked answer";
      out.body.clear();
      return out;
    }
    if (len == 0) break;
    out.body.append(raw, eol + 2, len);
    pos = std::min(raw.size(), eol + 2 + len + 2);
  }
  out.answered = true;
  return out;
}

}  // namespace kvtier
