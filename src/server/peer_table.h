// The clients the socket thread has greeted (HELLO), by ZMQ routing id. A ROUTER is not told when
// a peer leaves (ZMQ_ROUTER_NOTIFY is a draft option that Debian's libzmq refuses), so without
// care every connection ever made (each `kvtier ctl` call is one) would stay here for the
// server's life. A greeting is forgotten when another client greets on the same connection fd
// (ZMQ_SRCFD): two live connections never share an fd, so the earlier one is gone. The table is
// then no larger than the number of fds the server has had open at once.
// Thread-safety: none; the socket thread owns it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace kvtier {

class PeerTable {
 public:
  struct Peer {
    uint32_t version = 0;
    std::string client;  // the name the client gave in its HELLO
    int fd = -1;         // its connection; -1 when the transport has none (inproc)
  };

  // Records `id`'s HELLO on connection `fd`, forgetting whoever greeted on that fd before. A
  // HELLO that ZMQ queued before its connection closed may be read after the fd's next owner
  // greeted: such a stale greeting (an older ZMQ-made id than the fd's owner) is not recorded.
  void Greet(const std::string& id, int fd, uint32_t version, std::string client);
  const Peer* Find(const std::string& id) const;
  size_t size() const { return peers_.size(); }

 private:
  std::unordered_map<std::string, Peer> peers_;
  std::unordered_map<int, std::string> greeted_on_fd_;  // the last id that greeted on each fd
};

// Whether routing id `a` was made by the ROUTER before `b`: ZMQ numbers the connections of
// clients that set no id of their own (a 0 byte, then a 32-bit big-endian counter that wraps).
// False when either id is one a client chose.
bool MadeBefore(const std::string& a, const std::string& b);

}  // namespace kvtier
