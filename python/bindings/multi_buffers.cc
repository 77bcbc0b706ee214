#include "multi_buffers.h"

#include <algorithm>
#include <cstring>

#include "binding_helpers.h"

namespace kvtier {
namespace {

using store::ErrorCode;
using store::StoreError;

constexpr size_t kAlign = 64;  // each value starts on a cache line of the area

size_t Aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A key's result for Python: 0, or Mooncake's negative code.
int64_t CodeOf(const Status& s) { return static_cast<int64_t>(store::ErrorCodeOf(s)); }

}  // namespace

uint8_t* StagingArea::Reserve(store::StoreClient& client, size_t bytes, Status* error) {
  if (!areas_.empty() && areas_.back().size() >= bytes) return areas_.back().data();
  size_t size = std::max(kDefaultBytes, areas_.empty() ? 0 : 2 * areas_.back().size());
  while (size < bytes) size *= 2;
  auto file = MappedFile::Create("kvtier-multi-buffer-staging", size, /*prefault=*/true,
                                 /*huge_pages=*/true);
  if (!file.ok()) {
    *error = StoreError(ErrorCode::INTERNAL_ERROR, "staging area: " + file.status().ToString());
    return nullptr;
  }
  if (Status s = client.RegisterSharedMemory(file->data(), file->size(), file->fd()); !s.ok()) {
    *error = s;
    return nullptr;
  }
  areas_.push_back(std::move(*file));
  return areas_.back().data();
}

size_t StagingArea::ChunkEnd(const std::vector<Parts>& parts, size_t begin) const {
  const size_t capacity = areas_.empty() ? kDefaultBytes : areas_.back().size();
  size_t end = begin, used = 0;
  while (end < parts.size() && (end == begin || used + Aligned(parts[end].total) <= capacity)) {
    used += Aligned(parts[end].total);
    ++end;
  }
  return end;
}

// Splits the batch into chunks that fit the area, lays each chunk's values out in it, and calls
// run(first key index, keys, their ranges in the area, sizes, out) for each.
template <typename Run>
std::vector<int64_t> StagingArea::InChunks(store::StoreClient& client,
                                           const std::vector<std::string>& keys,
                                           const std::vector<Parts>& parts, Run run) {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  out.reserve(keys.size());
  for (size_t begin = 0; begin < keys.size();) {
    const size_t end = ChunkEnd(parts, begin);
    size_t bytes = 0;
    for (size_t i = begin; i < end; ++i) bytes += Aligned(parts[i].total);
    Status error;
    uint8_t* at = Reserve(client, bytes, &error);
    if (at == nullptr) {
      out.insert(out.end(), end - begin, CodeOf(error));
      begin = end;
      continue;
    }
    std::vector<void*> ptrs;
    std::vector<size_t> sizes;
    for (size_t i = begin; i < end; ++i) {
      ptrs.push_back(at);
      sizes.push_back(parts[i].total);
      at += Aligned(parts[i].total);
    }
    run(begin, std::vector<std::string>(keys.begin() + begin, keys.begin() + end), ptrs, sizes,
        out);
    begin = end;
  }
  return out;
}

std::vector<int64_t> StagingArea::Put(store::StoreClient& client,
                                      const std::vector<std::string>& keys,
                                      const std::vector<Parts>& parts,
                                      const store::PutConfig& config) {
  return InChunks(client, keys, parts,
                  [&](size_t begin, const std::vector<std::string>& chunk,
                      const std::vector<void*>& ptrs, const std::vector<size_t>& sizes,
                      std::vector<int64_t>& out) {
                    for (size_t i = 0; i < chunk.size(); ++i) {
                      auto* p = static_cast<uint8_t*>(ptrs[i]);
                      for (const auto& [data, n] : parts[begin + i].ranges) {
                        std::memcpy(p, data, n);
                        p += n;
                      }
                    }
                    auto codes = client.BatchPutFrom(chunk, ptrs, sizes, config);
                    for (size_t i = 0; i < chunk.size(); ++i) {
                      out.push_back(i < codes.size() ? CodeOf(codes[i]) : kInternalError);
                    }
                  });
}

std::vector<int64_t> StagingArea::Get(store::StoreClient& client,
                                      const std::vector<std::string>& keys,
                                      const std::vector<Parts>& parts) {
  return InChunks(client, keys, parts,
                  [&](size_t begin, const std::vector<std::string>& chunk,
                      const std::vector<void*>& ptrs, const std::vector<size_t>& sizes,
                      std::vector<int64_t>& out) {
                    auto got = client.BatchGetInto(chunk, ptrs, sizes);
                    for (size_t i = 0; i < chunk.size(); ++i) {
                      if (i >= got.size() || !got[i].ok()) {
                        out.push_back(i < got.size() ? CodeOf(got[i].status()) : kInternalError);
                        continue;
                      }
                      const size_t n = got[i].value();
                      const auto* p = static_cast<const uint8_t*>(ptrs[i]);
                      size_t done = 0;
                      for (const auto& [data, len] : parts[begin + i].ranges) {
                        const size_t take = std::min(len, n - done);
                        std::memcpy(data, p + done, take);
                        done += take;
                      }
                      out.push_back(static_cast<int64_t>(n));
                    }
                  });
}

}  // namespace kvtier
