// The flat forms of BodyWriter/BodyReader (rows in one vector, joined strs, str views) write the
// same bytes as the nested forms and read what those write: the master RPC uses them on one side
// while older peers use the others.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wire/body_codec.h"

namespace kvtier::wire {
namespace {

BodyReader ParseOrDie(const std::string& bytes) {
  auto r = BodyReader::Parse(bytes.data(), bytes.size());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : BodyReader();
}

TEST(BodyCodecFlat, FlatRowsAreTheNestedRowsBytes) {
  BodyWriter nested;
  nested.PutRows("r", std::vector<std::vector<uint64_t>>{{1, 2}, {3, UINT64_MAX}});
  BodyWriter flat;
  flat.PutRows("r", 2, std::vector<uint64_t>{1, 2, 3, UINT64_MAX});
  EXPECT_EQ(nested.Finish(), flat.Finish());
}

TEST(BodyCodecFlat, FlatRowsReadBackAndCheckTheirWidth) {
  BodyWriter w;
  w.PutRows("r", std::vector<std::vector<uint64_t>>{{1, 2, 3}, {4, 5, 6}});
  const BodyReader r = ParseOrDie(w.Finish());
  std::vector<uint64_t> flat;
  ASSERT_TRUE(r.GetRows("r", 3, flat).ok());
  EXPECT_EQ(flat, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_FALSE(r.GetRows("r", 2, flat).ok());
  EXPECT_FALSE(r.GetRows("missing", 3, flat).ok());
}

TEST(BodyCodecFlat, EmptyFlatRows) {
  BodyWriter w;
  w.PutRows("r", 4, std::vector<uint64_t>{});
  const BodyReader r = ParseOrDie(w.Finish());
  std::vector<uint64_t> flat{9};
  ASSERT_TRUE(r.GetRows("r", 4, flat).ok());
  EXPECT_TRUE(flat.empty());
}

// The nested read is the flat one cut into rows: the same values, and rows of width 0 counted.
TEST(BodyCodecFlat, NestedRowsReadAsTheFlatOnes) {
  BodyWriter w;
  w.PutRows("r", std::vector<std::vector<uint64_t>>{{1, 2}, {3, 4}, {5, 6}});
  w.PutRows("zero", std::vector<std::vector<uint64_t>>{{}, {}});
  const BodyReader r = ParseOrDie(w.Finish());
  std::vector<std::vector<uint64_t>> rows{{9}};
  ASSERT_TRUE(r.GetRows("r", 2, rows).ok());
  EXPECT_EQ(rows, (std::vector<std::vector<uint64_t>>{{1, 2}, {3, 4}, {5, 6}}));
  ASSERT_TRUE(r.GetRows("zero", 0, rows).ok());
  EXPECT_EQ(rows, (std::vector<std::vector<uint64_t>>{{}, {}}));
  EXPECT_FALSE(r.GetRows("r", 3, rows).ok());
}

TEST(BodyCodecFlat, JoinedIsTheConcatenationAndReadsAsAView) {
  BodyWriter joined;
  joined.PutJoined("s", {"ab", "", "cde"});
  BodyWriter whole;
  whole.Put("s", std::string_view("abcde"));
  const std::string bytes = joined.Finish();
  EXPECT_EQ(bytes, whole.Finish());
  const BodyReader r = ParseOrDie(bytes);
  std::string_view view;
  ASSERT_TRUE(r.GetView("s", view).ok());
  EXPECT_EQ(view, "abcde");
  EXPECT_FALSE(r.GetView("missing", view).ok());
}

TEST(BodyCodecFlat, ViewOfANonStringFails) {
  BodyWriter w;
  w.Put("n", uint64_t{7});
  const BodyReader r = ParseOrDie(w.Finish());
  std::string_view view;
  EXPECT_FALSE(r.GetView("n", view).ok());
}

}  // namespace
}  // namespace kvtier::wire
