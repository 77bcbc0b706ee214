// Small pieces every source file of the _kvtier module shares.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "store/protocol/store_errors.h"

namespace kvtier {

// Runs `f` without the GIL; its arguments must already be plain C++ values.
template <typename F>
auto NoGil(F&& f) {
  pybind11::gil_scoped_release release;
  return f();
}

// A key's result when the call gave none for it: Mooncake's INTERNAL_ERROR.
inline constexpr int64_t kInternalError = static_cast<int64_t>(store::ErrorCode::INTERNAL_ERROR);

}  // namespace kvtier
