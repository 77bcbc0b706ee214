// The store's error table: a Mooncake code survives the trip through Status, a status from the
// shared layers gets the code the store always gave it, and unknown wire values are not trusted.
#include "store/protocol/store_errors.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace kvtier::store {
namespace {

TEST(StoreErrorsTest, EveryCodeSurvivesTheTripThroughStatus) {
  const std::vector<ErrorCode> all = AllErrorCodes();
  EXPECT_EQ(all.size(), 26u);
  std::set<std::string_view> names;
  for (ErrorCode code : all) {
    const Status s = StoreError(code, "why");
    EXPECT_EQ(ErrorCodeOf(s), code) << ErrorName(code);
    EXPECT_EQ(s.ok(), code == ErrorCode::OK) << ErrorName(code);
    EXPECT_NE(std::string_view(ErrorName(code)), "UNKNOWN");
    names.insert(ErrorName(code));
  }
  EXPECT_EQ(names.size(), all.size());
}

TEST(StoreErrorsTest, EachCodeBelongsToAKvtierCode) {
  EXPECT_EQ(StoreError(ErrorCode::OBJECT_NOT_FOUND, "").code(), Code::kNotFound);
  EXPECT_EQ(StoreError(ErrorCode::OBJECT_ALREADY_EXISTS, "").code(), Code::kAlreadyExists);
  EXPECT_EQ(StoreError(ErrorCode::NO_AVAILABLE_HANDLE, "").code(), Code::kOutOfMemory);
  EXPECT_EQ(StoreError(ErrorCode::INVALID_PARAMS, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(StoreError(ErrorCode::RPC_FAIL, "").code(), Code::kUnavailable);
  EXPECT_EQ(StoreError(ErrorCode::RPC_TIMEOUT, "").code(), Code::kTimeout);
  EXPECT_EQ(StoreError(ErrorCode::INTERNAL_ERROR, "").code(), Code::kInternal);
  EXPECT_EQ(StoreError(ErrorCode::ILLEGAL_CLIENT, "").code(), Code::kPermissionDenied);
  EXPECT_EQ(StoreError(ErrorCode::OBJECT_HAS_LEASE, "").detail(), -706);
}

TEST(StoreErrorsTest, StatusesWithoutDetailKeepTheirOldStoreCodes) {
  EXPECT_EQ(ErrorCodeOf(Status::Ok()), ErrorCode::OK);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kTimeout, "")), ErrorCode::RPC_TIMEOUT);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kInvalidArgument, "")), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kOutOfRange, "")), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kTooLarge, "")), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kProtocolError, "")), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kNotFound, "")), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kAlreadyExists, "")), ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kOutOfMemory, "")), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kIoError, "")), ErrorCode::TRANSFER_FAIL);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kUnavailable, "")), ErrorCode::RPC_FAIL);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kPermissionDenied, "")), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kBusy, "")), ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(ErrorCodeOf(Status(Code::kInternal, "")), ErrorCode::INTERNAL_ERROR);
}

TEST(StoreErrorsTest, MessagesNameTheMooncakeCode) {
  EXPECT_EQ(StoreErrorString(StoreError(ErrorCode::OBJECT_NOT_FOUND, "key 'a'")),
            "OBJECT_NOT_FOUND(-704): key 'a'");
  EXPECT_EQ(StoreErrorString(Status(Code::kIoError, "reset")), "TRANSFER_FAIL(-800): reset");
  EXPECT_EQ(StoreErrorString(Status::Ok()), "OK");
}

TEST(StoreErrorsTest, UnknownWireValuesBecomeInternalErrors) {
  EXPECT_EQ(ErrorCodeFromInt(0), ErrorCode::OK);
  EXPECT_EQ(ErrorCodeFromInt(-704), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeFromInt(-705), ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(ErrorCodeFromInt(-2), ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(ErrorCodeFromInt(7), ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(std::string_view(ErrorName(static_cast<ErrorCode>(-2))), "UNKNOWN");
}

}  // namespace
}  // namespace kvtier::store
