#include "cli/store_commands_common.h"

#include <pthread.h>

#include <iostream>

#include "common/secret_file.h"

namespace kvtier::cli {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

bool ReadAuthTokenFlag(const std::string& file, std::string& token) {
  if (file.empty()) return true;
  auto t = ReadSecretFile(file, kMaxSecretBytes);
  if (!t.ok()) {
    std::cerr << "error: --auth-token-file " << t.status().message() << "\n";
    return false;
  }
  token = std::move(*t);
  return true;
}

void AddIgnoredMooncakeFlags(CLI::App* cmd, std::initializer_list<const char*> names,
                             std::vector<std::string>* given) {
  for (const char* name : names) {
    cmd->add_option(
           name,
           [given, flag = std::string(name)](const CLI::results_t&) {
             given->push_back(flag);
             return true;
           },
           "Mooncake's; accepted and ignored")
        ->expected(0, 1)
        ->group("Mooncake flags without a meaning here");
  }
}

void AddRefusedMooncakeSwitches(CLI::App* cmd, std::initializer_list<const char*> names,
                                const std::string& feature) {
  for (const char* name : names) {
    cmd->add_option(
           name,
           [flag = std::string(name), feature](const CLI::results_t& values) {
             const std::string v = values.empty() ? "" : values.back();
             if (v == "false" || v == "0") return true;
             if (!v.empty() && v != "true" && v != "1") {
               throw CLI::ValidationError(flag, "'" + v + "' is not true or false");
             }
             throw CLI::ValidationError(flag, "kvtier has no " + feature +
                                                  " yet (docs/mooncake-migration.md); only "
                                                  "false is accepted");
           },
           "Mooncake's " + feature + ": only false (kvtier has none)")
        ->expected(0, 1)
        ->group("Mooncake flags without a meaning here");
  }
}

void LogIgnoredFlags(const std::vector<std::string>& given) {
  for (const auto& name : given) {
    std::cerr << "note: ignoring Mooncake flag " << name << " (no meaning in kvtier)\n";
  }
}

}  // namespace kvtier::cli
