// ServerConfig::Validate: the defaults pass, and each bad field is refused with the flag named.
#include "server/server_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace kvtier {
namespace {

TEST(ServerConfigTest, DefaultsAreValid) { EXPECT_TRUE(ServerConfig{}.Validate().ok()); }

TEST(ServerConfigTest, EachBadFieldIsRefusedNamingItsFlag) {
  const struct {
    std::function<void(ServerConfig&)> spoil;
    std::string flag;
  } cases[] = {
      {[](ServerConfig& c) { c.hash = "md5"; }, "--hash"},
      {[](ServerConfig& c) { c.chunk_size = 0; }, "--chunk-size"},
      {[](ServerConfig& c) { c.l1_size_gb = 0; }, "--l1-size-gb"},
      {[](ServerConfig& c) { c.pin_ttl_s = 0; }, "--pin-ttl-s"},
      {[](ServerConfig& c) { c.session_ttl_s = -1; }, "--session-ttl-s"},
      {[](ServerConfig& c) { c.eviction_target_watermark = 0.9; }, "--eviction-target-watermark"},
      {[](ServerConfig& c) { c.l2_write_policy = "never"; }, "--l2-write-policy"},
      {[](ServerConfig& c) { c.l2_prefetch_max_in_flight = 0; }, "--l2-prefetch-max-in-flight"},
      {[](ServerConfig& c) {
         c.lmcache_port = 6555;
         c.auth_token = "secret";
       },
       "--lmcache-port"},
  };
  for (const auto& k : cases) {
    ServerConfig c;
    k.spoil(c);
    const Status s = c.Validate();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << k.flag;
    EXPECT_NE(s.message().find(k.flag), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace kvtier
