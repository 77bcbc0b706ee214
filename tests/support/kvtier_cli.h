// Runs the `kvtier` binary under test ($KVTIER_BIN) through the shell and collects its exit
// status, stdout and stderr: how the CLI tests drive `kvtier bench ...`.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/process/child.h"
#include "common/process/kvtier_launchers.h"

namespace kvtier::testing {

struct CliOutput {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `$KVTIER_BIN <args>`; args are shell words (quote JSON with single quotes). With timeout_s,
// a run that has not ended by then is killed (status 124), so a command that should have failed
// at once cannot hang the test.
inline CliOutput RunKvtier(const std::string& args, int timeout_s = 0) {
  CliOutput o;
  const std::string bin = process::KvtierBinFromEnv();
  if (bin.empty()) {
    ADD_FAILURE() << "KVTIER_BIN is not set (ctest sets it)";
    return o;
  }
  // One file per run: ctest runs tests of this binary in parallel processes.
  static std::atomic<int> runs{0};
  const std::string err_path = ::testing::TempDir() + "/kvtier-cli-stderr-" +
                               std::to_string(::getpid()) + "-" + std::to_string(runs++) + ".txt";
  process::SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "exec " + bin + " " + args + " 2>" + err_path};
  auto child = process::Child::Spawn(spec);  // its log is the command's stdout
  if (!child.ok()) {
    ADD_FAILURE() << child.status().ToString();
    return o;
  }
  const auto limit = timeout_s > 0 ? std::chrono::seconds(timeout_s) : std::chrono::hours(24);
  if (auto code = child->WaitExit(limit)) {
    o.status = *code;
  } else {
    child->Kill();
    o.status = 124;
  }
  o.out = child->Log();
  std::stringstream ss;
  ss << std::ifstream(err_path).rdbuf();
  o.err = ss.str();
  std::remove(err_path.c_str());
  return o;
}

}  // namespace kvtier::testing
