// The checker the fault suite relies on must itself catch what it claims to.
#include "fault/checksummed_value.h"

#include <gtest/gtest.h>

namespace kvtier::fault {
namespace {

TEST(ChecksummedValue, CatchesCorruptionForeignKeysAndTears) {
  auto v = MakeValue("k1", 4096, 7);
  EXPECT_EQ(CheckValue("k1", v), "");
  EXPECT_EQ(ValueVersion(v), 7u);
  EXPECT_NE(CheckValue("k2", v), "");
  auto flipped = v;
  flipped[2000] ^= 1;
  EXPECT_NE(CheckValue("k1", flipped), "");
  std::vector<uint8_t> zeros(4096, 0);
  EXPECT_NE(CheckValue("k1", zeros), "");
  auto torn = MakeValue("k1", 4096, 8);
  std::copy(v.begin(), v.begin() + 2048, torn.begin());
  EXPECT_NE(CheckValue("k1", torn), "");
  EXPECT_NE(MakeValue("k1", 4096, 1), MakeValue("k1", 4096, 2));
  EXPECT_EQ(CheckValue("k1", MakeValue("k1", 25)), "");
}

}  // namespace
}  // namespace kvtier::fault
