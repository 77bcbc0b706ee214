// The live dashboard's static files (web/dashboard/), compiled into the binary by
// cmake/embed_files.cmake so every process serves them with no install step (admin_http.cc).
#pragma once

#include <string_view>
#include <vector>

namespace kvtier {

struct EmbeddedFile {
  std::string_view path;  // relative to web/dashboard/, e.g. "index.html"
  std::string_view content_type;
  std::string_view bytes;
};

const std::vector<EmbeddedFile>& DashboardFiles();

}  // namespace kvtier
