"""kvtier._process for a process that must stay free of kvtier's native module (bench/
peer_clusters.py's orchestrator, the soak, launchers.py): importing kvtier._process would import
the kvtier package, which loads it, so this loads python/kvtier/_process.py by path instead, or
uses kvtier._process where kvtier is imported already. Tests that import kvtier use
kvtier._process."""

import importlib.util
import sys
from pathlib import Path


def _load():
    if "kvtier" in sys.modules:  # loaded already: one copy of the module, one ProcessError
        import kvtier._process
        return kvtier._process
    path = Path(__file__).resolve().parents[2] / "python" / "kvtier" / "_process.py"
    spec = importlib.util.spec_from_file_location("kvtier_process_standalone", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_process = _load()
Child = _process.Child
ProcessError = _process.ProcessError
die_with_parent = _process.die_with_parent
free_port = _process.free_port
http_get = _process.http_get
http_ok = _process.http_ok
start_on_free_ports = _process.start_on_free_ports
stop_process = _process.stop_popen  # its old name
tcp_open = _process.tcp_open
wait_until = _process.wait_until
