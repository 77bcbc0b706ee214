"""The engine suite: the real vLLM, SGLang, LMCache and Mooncake packages driving kvtier.

Run by tests/engines/run.py inside the venv of scripts/engines-venv.sh, one pytest process per
engine (LMCache's tests import kvtier's `mooncake` package, Mooncake's import the real wheel's,
and both are called `mooncake`). The helpers of tests/python (store_cluster, LocalServer) are
shared from there.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
