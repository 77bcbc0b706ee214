// A MasterService on a FakeClock with helpers for the master_service_*_test files: mount a
// node's segment, put (start + end), read counters. No sleeping anywhere: time moves by Advance().
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "store/master/master_service.h"

namespace kvtier::store {

class MasterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart(MasterOptions{}); }

  // A fresh master (same clock): options for one test, or a master "restart".
  void Restart(MasterOptions options) {
    master_.reset();
    metrics_ = std::make_unique<MetricsRegistry>();
    master_ = std::make_unique<MasterService>(options, &clock_, metrics_.get());
  }

  static NodeInfo Node(const std::string& id) { return NodeInfo{id, id + ".host:7000"}; }
  static std::string Endpoint(const std::string& id) { return id + ".host:7000"; }

  Status Mount(const std::string& node, uint64_t segment_id, uint64_t size) {
    return master_->MountSegment(Node(node), SegmentInfo{segment_id, size, Endpoint(node)});
  }

  Result<std::vector<ReplicaDesc>> Start(const std::string& node, const std::string& key,
                                         uint64_t size, PutConfig config = {}) {
    auto r = master_->PutStart(node, {key}, {size}, config);
    EXPECT_EQ(r.size(), 1u);
    return std::move(r.at(0));
  }
  Status End(const std::string& node, const std::string& key) {
    return master_->PutEnd(node, {key}).at(0);
  }
  // PutStart + PutEnd; returns the replicas (empty on failure, which the test sees).
  std::vector<ReplicaDesc> Put(const std::string& node, const std::string& key, uint64_t size,
                               PutConfig config = {}) {
    auto r = Start(node, key, size, config);
    EXPECT_TRUE(r.ok()) << key << ": " << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_TRUE(End(node, key).ok()) << key;
    return *r;
  }
  Result<ObjectDesc> Get(const std::string& key) { return master_->GetReplicas({key}).at(0); }
  ErrorCode GetCode(const std::string& key) { return ErrorCodeOf(Get(key).status()); }
  bool Exists(const std::string& key) {
    auto r = master_->Exist({key}).at(0);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && *r;
  }
  ErrorCode RemoveCode(const std::string& key) { return ErrorCodeOf(master_->Remove({key}).at(0)); }

  void Advance(std::chrono::nanoseconds d) { clock_.Advance(d); }

  double CounterValue(const std::string& name, const Labels& labels = {}) {
    return metrics_->GetCounter(name, "", labels)->Value();
  }
  uint64_t Allocated() { return master_->StatusJson()["allocated_bytes"].get<uint64_t>(); }
  uint64_t Keys() { return master_->StatusJson()["keys"].get<uint64_t>(); }

  FakeClock clock_;
  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<MasterService> master_;
};

}  // namespace kvtier::store
