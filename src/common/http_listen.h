// Every kvtier HTTP listener (cpp-httplib) reuses its address only. httplib's default also sets
// SO_REUSEPORT, which lets a second process bind the same port and take a share of its
// connections; without it, a taken port is a startup error. Header-only: for the layers that
// link httplib.
#pragma once

#include <httplib.h>
#include <sys/socket.h>

namespace kvtier {

inline void ReuseAddressOnly(httplib::Server& server) {
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

}  // namespace kvtier
