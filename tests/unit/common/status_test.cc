#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kvtier {
namespace {

TEST(StatusTest, OkAndError) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "OK");
  Status err(Code::kOutOfRange, "block id 9 >= 8");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.code(), Code::kOutOfRange);
  EXPECT_EQ(err.ToString(), "OUT_OF_RANGE: block id 9 >= 8");
}

TEST(StatusTest, CodesAreStableOnTheWire) {
  // Codes travel on the wire: renumbering one breaks older peers.
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 1);
  EXPECT_EQ(static_cast<int>(Code::kIoError), 7);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 13);
  EXPECT_EQ(static_cast<int>(Code::kUnknownRequest), 16);
  for (int c = 0; c <= 16; ++c) {
    EXPECT_STRNE(CodeName(static_cast<Code>(c)), "UNKNOWN_CODE") << c;
  }
  EXPECT_STREQ(CodeName(static_cast<Code>(999)), "UNKNOWN_CODE");
}

Status FailIf(bool fail) { return fail ? Status(Code::kBusy, "locked") : Status::Ok(); }

Status Chain(bool fail, bool* reached) {
  KVT_RETURN_IF_ERROR(FailIf(fail));
  *reached = true;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfError) {
  bool reached = false;
  EXPECT_EQ(Chain(true, &reached).code(), Code::kBusy);
  EXPECT_FALSE(reached);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_TRUE(reached);
}

TEST(ResultTest, ValueAndError) {
  Result<std::string> v(std::string("x"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(*v, "x");
  EXPECT_EQ(v->size(), 1u);
  Result<std::string> e(Code::kNotFound, "no such key");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().ToString(), "NOT_FOUND: no such key");
}

TEST(StatusTest, DetailTravelsWithTheStatus) {
  EXPECT_EQ(Status().detail(), 0);
  EXPECT_EQ(Status(Code::kNotFound, "k").detail(), 0);
  const Status leased(Code::kBusy, "key k has a lease", -706);
  EXPECT_EQ(leased.detail(), -706);
  EXPECT_EQ(leased.ToString(), "BUSY: key k has a lease");
  Result<int> r(leased);
  EXPECT_EQ(r.status().detail(), -706);
  auto pass_on = [&]() -> Status {
    KVT_RETURN_IF_ERROR(r.status());
    return Status::Ok();
  };
  EXPECT_EQ(pass_on().detail(), -706);
}

TEST(ResultTest, MoveOnlyValue) {

  Result<std::unique_ptr<int>> r(std::make_unique<int>(5));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

}  // namespace
}  // namespace kvtier
