// A master's RECORDS and REPORT on a node's data plane (docs/store/failover.md): answered only
// for the served segment and a term not older than the latest seen, behind the same secret as
// reads and writes, and a REPORT's reply is as long as its records (not an error message's limit).
#include <gtest/gtest.h>

#include "store/protocol/store_errors.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/data_plane_server.h"
#include "store/transport/records_client.h"

namespace kvtier::store {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSeg = 77;

struct Server {
  explicit Server(bool with_records, std::string token = "") {
    gate = std::make_shared<SegmentGate>(kSeg);
    DataPlaneOptions o;
    o.segment_id = kSeg;
    o.gate = gate;
    o.auth_token = std::move(token);
    if (with_records) {
      o.records = [this](uint8_t op, uint64_t cursor,
                         std::string_view payload) -> Result<std::string> {
        if (op == static_cast<uint8_t>(dp::Op::kReport)) {
          RecordReport report;
          for (uint64_t i = cursor; i < cursor + 100; ++i) {
            ObjectRecord r;
            r.key = std::string(64, 'k') + std::to_string(i);
            r.segment_id = kSeg;
            r.offset = i * 64;
            report.records.push_back(r);
          }
          report.next_cursor = cursor == 0 ? 100 : 0;
          return EncodeRecordReport(report);
        }
        auto batch = DecodeRecordBatch(payload);
        if (!batch.ok()) return batch.status();
        received += batch->size();
        return std::string();
      };
    }
    server = std::make_unique<DataPlaneServer>(std::move(o), &metrics);
    EXPECT_TRUE(server->Start().ok());
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(server->Port()); }

  size_t received = 0;
  MetricsRegistry metrics;
  std::shared_ptr<SegmentGate> gate;
  std::unique_ptr<DataPlaneServer> server;
};

std::string Batch(size_t n) {
  std::vector<ObjectRecord> records(n);
  for (size_t i = 0; i < n; ++i) {
    records[i].key = "key" + std::to_string(i);
    records[i].segment_id = kSeg;
  }
  return EncodeRecordBatch(records);
}

TEST(RecordsOps, ReachTheHookForTheServedSegmentAndATermNotOlder) {
  Server node(true);
  RecordsClient client("", 2000ms);
  node.gate->SeeTerm(5);
  ASSERT_TRUE(client.Send(node.endpoint(), kSeg, 5, Batch(3)).ok());
  ASSERT_TRUE(client.Send(node.endpoint(), kSeg, 6, Batch(2)).ok());  // a later term: remembered
  EXPECT_EQ(node.received, 5u);
  EXPECT_EQ(node.gate->term(), 6u);
  const Status old = client.Send(node.endpoint(), kSeg, 5, Batch(1));
  EXPECT_EQ(ErrorCodeOf(old), ErrorCode::ETCD_TRANSACTION_FAIL) << old.ToString();
  const Status other = client.Send(node.endpoint(), kSeg + 1, 6, Batch(1));
  EXPECT_EQ(ErrorCodeOf(other), ErrorCode::SEGMENT_NOT_FOUND) << other.ToString();
  EXPECT_EQ(node.received, 5u);
  // Two chunks of 100 records, each far over the 1,024 bytes of an error message.
  auto first = client.Report(node.endpoint(), kSeg, 6, 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->records.size(), 100u);
  EXPECT_EQ(first->next_cursor, 100u);
  auto second = client.Report(node.endpoint(), kSeg, 6, first->next_cursor);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->records.at(0).offset, 100u * 64);
  EXPECT_EQ(second->next_cursor, 0u);
}

TEST(RecordsOps, ANodeWithoutRecordsOrWithAnotherSecretRefuses) {
  Server plain(false);
  RecordsClient client("", 2000ms);
  EXPECT_EQ(ErrorCodeOf(client.Send(plain.endpoint(), kSeg, 0, Batch(1))),
            ErrorCode::INVALID_PARAMS);
  Server guarded(true, "secret");
  EXPECT_FALSE(client.Send(guarded.endpoint(), kSeg, 0, Batch(1)).ok());  // no proof
  RecordsClient wrong("other", 2000ms);
  EXPECT_FALSE(wrong.Send(guarded.endpoint(), kSeg, 0, Batch(1)).ok());
  RecordsClient right("secret", 2000ms);
  EXPECT_TRUE(right.Send(guarded.endpoint(), kSeg, 0, Batch(1)).ok());
  EXPECT_EQ(guarded.received, 1u);
}

}  // namespace
}  // namespace kvtier::store
