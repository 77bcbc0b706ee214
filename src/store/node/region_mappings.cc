#include "store/node/region_mappings.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/metrics.h"

namespace kvtier::store {

Result<std::shared_ptr<const MappedFile>> RegionMappings::Map(wire::UniqueFd fd, uint64_t size) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return StoreError(ErrorCode::INVALID_PARAMS, fmt::format("fstat: {}", std::strerror(errno)));
  }
  const auto file = std::make_pair(st.st_dev, st.st_ino);
  std::lock_guard lock(mu_);
  // Expired entries of other files are dropped here, so the map stays as small as the live set.
  std::erase_if(live_, [](const auto& e) { return e.second.expired(); });
  if (auto it = live_.find(file); it != live_.end()) {
    auto mapping = it->second.lock();
    if (mapping && mapping->size() >= size) return mapping;
  }
  auto mapped = MappedFile::MapFd(fd.Release(), size);
  if (!mapped.ok()) return StoreError(ErrorCode::INVALID_PARAMS, mapped.status().message());
  if (populate_) mapped->PopulateForWrite();
  Gauge* gauge = mapped_bytes_;
  const double bytes = static_cast<double>(mapped->size());
  if (gauge != nullptr) gauge->Add(bytes);
  // Counted down when the last region using it lets go (the mapping is unmapped then).
  std::shared_ptr<const MappedFile> mapping(new MappedFile(std::move(*mapped)),
                                            [gauge, bytes](const MappedFile* f) {
                                              delete f;
                                              if (gauge != nullptr) gauge->Add(-bytes);
                                            });
  live_[file] = mapping;
  return mapping;
}

}  // namespace kvtier::store
