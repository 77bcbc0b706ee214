// AfterReply: work queued inside a scope runs when the scope ends (after the reply), in order;
// outside any scope it runs at once.
#include "server/after_reply.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier {
namespace {

TEST(AfterReplyTest, OutsideAScopeWorkRunsAtOnce) {
  int runs = 0;
  AfterReply([&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

TEST(AfterReplyTest, InsideAScopeWorkWaitsForItsEndAndKeepsItsOrder) {
  std::string log;
  {
    AfterReplyScope scope;
    AfterReply([&] { log += "a"; });
    AfterReply([&] { log += "b"; });
    log += "reply;";
  }
  EXPECT_EQ(log, "reply;ab");
  AfterReply([&] { log += "!"; });  // the scope is gone: at once again
  EXPECT_EQ(log, "reply;ab!");
}

TEST(AfterReplyTest, NestedScopesRunTheirOwnWork) {
  std::string log;
  {
    AfterReplyScope outer;
    AfterReply([&] { log += "outer;"; });
    {
      AfterReplyScope inner;
      AfterReply([&] { log += "inner;"; });
    }
    log += "between;";
  }
  EXPECT_EQ(log, "inner;between;outer;");
}

}  // namespace
}  // namespace kvtier
