// A real MasterService behind a real MasterRpcServer on a free loopback port, for tests that talk
// to the master over the network.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/free_port.h"
#include "common/metrics.h"
#include "store/master/master_rpc_server.h"
#include "store/master/master_service.h"

namespace kvtier::store {

struct LoopbackMaster {
  // `secret` empty: no authentication. A failed start fails the test (check with ASSERT_TRUE(ok)).
  explicit LoopbackMaster(const std::string& secret = "") {
    for (int attempt = 0; attempt < 20 && !ok; ++attempt) {
      port = FreeLoopbackPort();
      ok = rpc.Start("127.0.0.1", port, secret).ok();
    }
    EXPECT_TRUE(ok) << "no free port for the master";
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  MetricsRegistry metrics;
  MasterService service{MasterOptions{}, Clock::Real(), &metrics};
  MasterRpcServer rpc{service, metrics};
  uint16_t port = 0;
  bool ok = false;
};

}  // namespace kvtier::store
