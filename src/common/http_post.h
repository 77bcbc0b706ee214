// One HTTP/1.1 POST on a fresh connection, bounded by one deadline: a tiny client for JSON
// gateways whose answers cpp-httplib 0.11 cannot read. etcd's gateway sends its error answers
// chunked with a trailer (Grpc-Trailer-Content-Type), which httplib 0.11 reports as a read error,
// so every etcd error (a bad key, an unknown lease) would look like a lost connection.
#pragma once

#include <chrono>
#include <string>

namespace kvtier {

struct HttpPostResult {
  bool answered = false;  // a complete answer came: status and body are set
  bool sent = false;      // when not answered: the request may have reached the server
  int status = 0;
  std::string body;
  std::string error;  // when not answered: why ("connect: Connection refused")
};

// Connects to host:port (a name or an address), sends `body` with "Connection: close" and reads
// the answer until the server closes, all within `timeout` (name resolution aside: getaddrinfo
// cannot be bounded; pass an address where that matters).
HttpPostResult HttpPost(const std::string& host, int port, const std::string& path,
                        const std::string& body, const std::string& content_type,
                        std::chrono::milliseconds timeout);

// Parses a whole answer: status line, headers, and a body that is either everything after them
// or chunked (a trailer after the last chunk is skipped). Sets answered, or error.
HttpPostResult ParseHttpAnswer(const std::string& raw);

}  // namespace kvtier
