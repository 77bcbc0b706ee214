// Runs the `kvtier` binary under test ($KVTIER_BIN) through the shell and collects its exit
// status, stdout and stderr: how the CLI tests drive `kvtier bench ...`.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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
  const char* bin = std::getenv("KVTIER_BIN");
  if (bin == nullptr) {
    ADD_FAILURE() << "KVTIER_BIN is not set (ctest sets it)";
    return o;
  }
  // One file per run: ctest runs tests of this binary in parallel processes.
  static std::atomic<int> runs{0};
  const std::string err_path = ::testing::TempDir() + "/kvtier-cli-stderr-" +
                               std::to_string(::getpid()) + "-" + std::to_string(runs++) + ".txt";
  const std::string limit = timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : "";
  const std::string cmd = limit + bin + " " + args + " 2>" + err_path;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) o.out.append(buf, n);
  const int st = ::pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::stringstream ss;
  ss << std::ifstream(err_path).rdbuf();
  o.err = ss.str();
  std::remove(err_path.c_str());
  return o;
}

}  // namespace kvtier::testing
