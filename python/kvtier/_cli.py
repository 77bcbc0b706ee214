"""The `kvtier` command of an installed wheel: runs the binary shipped inside the package."""

import os
import sys
from pathlib import Path


def bundled_binary():
    """kvtier/bin/kvtier of an installed wheel, or None (a build tree has none)."""
    path = Path(__file__).resolve().parent / "bin" / "kvtier"
    return str(path) if os.access(path, os.X_OK) else None


def main():
    binary = bundled_binary()
    if binary is None:
        sys.exit("kvtier: the kvtier binary is not installed with this package")
    os.execv(binary, [binary] + sys.argv[1:])
