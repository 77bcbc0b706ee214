// DecodeReply<R>(body): a reply body decoded as R, for tests that call request handlers
// in-process; a body that does not decode fails the test and yields R{}.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "wire/body_codec.h"

namespace kvtier::testing {

template <typename Reply>
Reply DecodeReply(const std::string& body) {
  auto r = wire::BodyReader::Parse(body.data(), body.size());
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return Reply{};
  auto m = Reply::Decode(*r);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Reply{};
}

}  // namespace kvtier::testing
