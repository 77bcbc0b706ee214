// The store half of the _kvtier extension module (kvtier.store builds its DistributedStore on it).
#pragma once

#include <pybind11/pybind11.h>

namespace kvtier {

// Adds StoreHandle, store_error_codes() and parse_byte_size() to `m`.
void InitStoreBindings(pybind11::module_& m);

}  // namespace kvtier
