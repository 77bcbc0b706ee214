#!/usr/bin/env python3
"""The machine block and the file handling that every bench report written for
bench/markdown.py shares.

The machine block uses the C++ benches' keys (`cpus`, `load_avg_1m`, from
src/bench/common/report_json.cc) and adds `cpu_model`, `memory_bytes`, `kernel` and `date` (UTC,
ISO 8601), so one reader handles the reports of both.

As a command, it stamps a report another bench wrote (scripts/bench.sh runs it right after each
bench, on the same machine): adds the machine keys that are missing and the command that made it.
  python3 bench/bench_report.py stamp FILE --command "build/kvtier bench store ..."
"""

import argparse
import datetime
import json
import os
import sys


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def _memory_bytes():
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine():
    """This machine now, in the C++ benches' keys plus the ones they lack."""
    return {
        "cpus": os.sysconf("SC_NPROCESSORS_ONLN"),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cpu_model": _cpu_model(),
        "memory_bytes": _memory_bytes(),
        "kernel": os.uname().release,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def command_line():
    """How this Python bench was started, as one would type it from the repository root, less
    the --json-out FILE that only says where the report went."""
    args, rest = [], iter(sys.argv[1:])
    for arg in rest:
        if arg == "--json-out":
            next(rest, None)
        elif not arg.startswith("--json-out="):
            args.append(arg)
    return " ".join(["python3", os.path.relpath(sys.argv[0])] + args)


def write_json(path, doc):
    """Writes `doc` to a temporary name first, so a failed run never leaves half a report."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def stamp(path, command):
    """Adds to the report in `path` the machine keys it lacks and `command` (kept if present)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    block = doc.setdefault("machine", {})
    for key, value in machine().items():
        block.setdefault(key, value)
    doc.setdefault("command", command)
    write_json(path, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    st = sub.add_parser("stamp", help="add the machine block and the command to a report")
    st.add_argument("file")
    st.add_argument("--command", required=True, help="the command that wrote the report")
    args = ap.parse_args()
    stamp(args.file, args.command)


if __name__ == "__main__":
    main()
