#include <pybind11/pybind11.h>
PYBIND11_MODULE(_kvtier, m) { m.doc() = "kvtier native client"; }
