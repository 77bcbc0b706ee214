// MasterServerOptions::Validate: the defaults pass; each rule refuses its field by name with
// INVALID_ARGUMENT; MasterServer::Start refuses bad options before binding anything.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "store/master/master_server.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;

// Options under etcd that pass: endpoints, prefix and the leadership callback.
MasterServerOptions UnderEtcd() {
  MasterServerOptions o;
  o.etcd_endpoints = "127.0.0.1:2379";
  o.etcd_prefix = "/kvtier/default";
  o.on_leadership_lost = [](const std::string&) {};
  return o;
}

struct Case {
  std::string name;  // what the message must name
  std::function<void(MasterServerOptions&)> spoil;
  bool under_etcd = false;
};

TEST(MasterServerOptions, DefaultsAndAnEtcdSetupPass) {
  EXPECT_TRUE(MasterServerOptions{}.Validate().ok()) << MasterServerOptions{}.Validate().ToString();
  EXPECT_TRUE(UnderEtcd().Validate().ok()) << UnderEtcd().Validate().ToString();
  MasterServerOptions wildcard = UnderEtcd();
  wildcard.host = "0.0.0.0";
  wildcard.advertise = "10.0.0.1:50051";
  EXPECT_TRUE(wildcard.Validate().ok()) << wildcard.Validate().ToString();
  MasterServerOptions no_http;
  no_http.http_port = 0;
  EXPECT_TRUE(no_http.Validate().ok());
}

TEST(MasterServerOptions, EachRuleRefusesItsFieldByName) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"host", [](auto& o) { o.host.clear(); }},
      {"port", [](auto& o) { o.port = 0; }},
      {"http port", [](auto& o) { o.http_port = o.port; }},
      {"eviction high watermark ratio",
       [](auto& o) { o.service.eviction_high_watermark_ratio = 1.5; }},
      {"eviction high watermark ratio",
       [nan](auto& o) { o.service.eviction_high_watermark_ratio = nan; }},
      {"eviction ratio", [](auto& o) { o.service.eviction_ratio = -0.1; }},
      {"node ttl", [](auto& o) { o.service.node_ttl = milliseconds(0); }},
      {"kv lease ttl", [](auto& o) { o.service.default_kv_lease_ttl = milliseconds(-1); }},
      {"max kv soft pin ttl", [](auto& o) { o.service.max_kv_soft_pin_ttl = milliseconds(0); }},
      {"default kv soft pin ttl",
       [](auto& o) { o.service.default_kv_soft_pin_ttl = milliseconds(0); }},
      {"default kv soft pin ttl",
       [](auto& o) {
         o.service.default_kv_soft_pin_ttl = o.service.max_kv_soft_pin_ttl + milliseconds(1);
       }},
      {"discard timeout", [](auto& o) { o.service.put_start_discard_timeout = milliseconds(0); }},
      {"release timeout",
       [](auto& o) {
         o.service.put_start_discard_timeout = milliseconds(60000);
         o.service.put_start_release_timeout = milliseconds(30000);
       }},
      {"replicas", [](auto& o) { o.service.replicas = 0; }},
      {"replicas", [](auto& o) { o.service.replicas = 65; }},
      {"etcd prefix without etcd endpoints", [](auto& o) { o.etcd_prefix = "/kvtier/x"; }},
      {"advertise without etcd endpoints", [](auto& o) { o.advertise = "10.0.0.1:50051"; }},
      {"etcd prefix", [](auto& o) { o.etcd_prefix.clear(); }, true},
      {"on_leadership_lost", [](auto& o) { o.on_leadership_lost = nullptr; }, true},
      {"etcd lease ttl", [](auto& o) { o.etcd_lease_ttl_s = 1; }, true},
      {"etcd lease ttl", [](auto& o) { o.etcd_lease_ttl_s = 3601; }, true},
      {"advertise", [](auto& o) { o.host = "0.0.0.0"; }, true},
      {"advertise", [](auto& o) { o.host = "::"; }, true},
  };
  for (const Case& c : cases) {
    MasterServerOptions o = c.under_etcd ? UnderEtcd() : MasterServerOptions{};
    c.spoil(o);
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.name), std::string::npos) << c.name << ": " << s.message();
  }
}

TEST(MasterServerOptions, StartRefusesBadOptionsBeforeListening) {
  MasterServerOptions o;
  o.port = 0;  // would bind an ephemeral port if Start did not check first
  o.http_port = 0;
  MasterServer server(o);
  const Status s = server.Start();
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("port"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kvtier::store
