// A fresh directory under $TMPDIR (or /tmp) for a test's server, removed with everything in it
// when destroyed. path() is empty when it could not be made.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvtier::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kvtier-" +
                       prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kvtier::testing
