#include "common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kvtier {
namespace {

using ::testing::HasSubstr;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvt-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

TEST_F(ConfigTest, LoadsObject) {
  const std::string path = Write("ok.json", R"({
    // comments are allowed
    "port": 5555, "l1-size": "4GiB", "nested": {"a": [1, 2]}
  })");
  auto r = LoadJsonFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()["port"], 5555);
  EXPECT_EQ(r.value()["l1-size"], "4GiB");
  EXPECT_EQ(r.value()["nested"]["a"][1], 2);
}

TEST_F(ConfigTest, MissingFileIsNotFound) {
  auto r = LoadJsonFile(dir_ + "/absent.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("absent.json"));
}

TEST_F(ConfigTest, ParseErrorNamesFileAndPosition) {
  const std::string path = Write("bad.json", "{\n  \"port\": 5555,\n  \"x\": ]\n}");
  auto r = LoadJsonFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(path + ": "));
  EXPECT_THAT(r.status().message(), HasSubstr("line 3"));
}

TEST_F(ConfigTest, EmptyFileIsAnError) {
  auto r = LoadJsonFile(Write("empty.json", ""));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST_F(ConfigTest, TopLevelMustBeObject) {
  for (const char* text : {"[1, 2]", "42", "\"str\"", "null"}) {
    auto r = LoadJsonFile(Write("notobj.json", text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("JSON object")) << text;
  }
}

TEST_F(ConfigTest, DirectoryIsAnError) {
  auto r = LoadJsonFile(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("directory"));
}

}  // namespace
}  // namespace kvtier
