// Python's setup() arguments as the JSON config of the store's one setup parser
// (store/node/store_client_factory.h): kvtier.store builds one dict, this turns it into JSON.
// Header-only: the _kvtier target lists its sources in CMakeLists.txt.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "store/node/store_client_factory.h"

namespace kvtier {

// None -> null, bool, int (beyond 64 bits: its decimal text, which the parser refuses by key),
// float, str, bytes (as text), dict (keys as str()), list/tuple; anything else as str(value), so
// that an ignored key may hold any object and a known key's refusal shows what it got.
inline nlohmann::json JsonOfPython(pybind11::handle value) {
  namespace py = pybind11;
  PyObject* p = value.ptr();
  if (value.is_none()) return nullptr;
  if (PyBool_Check(p)) return p == Py_True;
  if (PyLong_Check(p)) {
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow == 0) return static_cast<int64_t>(n);
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(p);
      if (!PyErr_Occurred()) return static_cast<uint64_t>(u);
      PyErr_Clear();
    }
    return py::str(value).cast<std::string>();
  }
  if (PyFloat_Check(p)) return PyFloat_AsDouble(p);
  if (PyUnicode_Check(p)) return value.cast<std::string>();
  if (PyBytes_Check(p)) return std::string(value.cast<py::bytes>());
  if (PyDict_Check(p)) {
    nlohmann::json out = nlohmann::json::object();
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(value)) {
      out[py::str(k).cast<std::string>()] = JsonOfPython(v);
    }
    return out;
  }
  if (PyList_Check(p) || PyTuple_Check(p)) {
    nlohmann::json out = nlohmann::json::array();
    for (py::handle item : value) out.push_back(JsonOfPython(item));
    return out;
  }
  return py::str(value).cast<std::string>();
}

// What the parser made of a config, for kvtier.store's tests (keyword and dict forms agree).
inline pybind11::dict DictOfStoreConfig(const store::StoreClientConfig& c) {
  namespace py = pybind11;
  py::dict d;
  d["dummy"] = c.dummy;
  if (c.dummy) {
    d["server_address"] = c.dummy_options.server_address;
    d["mem_pool_size"] = c.dummy_options.mem_pool_size;
    d["local_buffer_size"] = c.dummy_options.local_buffer_size;
    d["rpc_timeout_ms"] = c.dummy_options.timeout.count();
    return d;
  }
  const store::NodeOptions& n = c.embedded_options.node;
  d["master"] = n.master;
  d["host"] = n.host;
  d["port"] = n.port;
  d["global_segment_size"] = n.segment_size;
  d["local_buffer_size"] = c.embedded_options.local_buffer_size;
  d["rpc_timeout_ms"] = n.rpc_timeout.count();
  d["auth_token"] = n.auth_token;
  return d;
}

}  // namespace kvtier
