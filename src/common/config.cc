#include "common/config.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvtier {

Result<nlohmann::json> LoadJsonFile(const std::string& path) {
  std::error_code ec;
  // A directory opens fine as a stream and reads as empty; say what is really wrong.
  if (std::filesystem::is_directory(path, ec)) {
    return Status(Code::kInvalidArgument, path + ": is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return Status(err == ENOENT ? Code::kNotFound : Code::kIoError,
                  path + ": cannot open: " + std::strerror(err));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status(Code::kIoError, path + ": read failed");
  nlohmann::json j;
  try {
    // Comments are allowed so operators can annotate their config files.
    j = nlohmann::json::parse(text.str(), /*cb=*/nullptr, /*allow_exceptions=*/true,
                              /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    // e.what() carries the line and column of the error.
    return Status(Code::kInvalidArgument, path + ": " + e.what());
  }
  if (!j.is_object()) {
    return Status(Code::kInvalidArgument,
                  path + ": top level must be a JSON object, got " + std::string(j.type_name()));
  }
  return j;
}

}  // namespace kvtier
