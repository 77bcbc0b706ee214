// `kvtier ctl` for the CLI tests of the server (integration/ctl_test.cc) and the store
// (integration_store/ctl_store_test.cc): run it, parse its --json, look for text in its output.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/kvtier_cli.h"

namespace kvtier::testing {

// `kvtier ctl <args>`; a run still going after 60 s fails (status 124).
inline CliOutput Ctl(const std::string& args) { return RunKvtier("ctl " + args, 60); }

// `kvtier ctl <args> --json`, which must exit 0 and print JSON.
inline nlohmann::json CtlJson(const std::string& args) {
  const CliOutput o = Ctl(args + " --json");
  EXPECT_EQ(o.status, 0) << args << "\n" << o.err;
  nlohmann::json j = nlohmann::json::parse(o.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << args << " printed no JSON:\n" << o.out;
  return j;
}

inline void ExpectContains(const std::string& text, const std::string& what) {
  EXPECT_NE(text.find(what), std::string::npos) << "'" << what << "' missing from:\n" << text;
}

}  // namespace kvtier::testing
