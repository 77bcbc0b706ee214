"""A dummy client on one "host" of test_store_multihost.py, run inside that host's namespace:
python _netns_client.py NODE_ADDRESS. It reads one JSON request per line on stdin and answers
one JSON line on stdout, so the test can drive clients on several hosts while it cuts links.

  {"op": "put", "keys": [...], "size": N, "preferred": "ip:port" or ""}
      -> {"codes": [...], "seconds": [...]}    the put's return code and duration per key
  {"op": "get", "keys": [...], "size": N}
      -> {"results": [...], "seconds": [...]}  "ok", "corrupt" or the error code, per key

Every value is a function of its key, so any host can check any other host's bytes."""

import hashlib
import json
import sys
import time

import numpy as np

from kvtier.store import DistributedStore, ReplicateConfig

POOL_BYTES = 64 << 20


def value_of(key, size):
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def main():
    store = DistributedStore()
    code = store.setup_dummy(POOL_BYTES, POOL_BYTES, sys.argv[1])
    if code != 0:
        print(json.dumps({"error": f"setup_dummy({sys.argv[1]}) = {code}"}), flush=True)
        return 1
    ptr = store.alloc_from_mem_pool(POOL_BYTES // 2)
    buf = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (POOL_BYTES // 2)).from_address(ptr))
    assert store.register_buffer(ptr, POOL_BYTES // 2) == 0
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        size, answer = req["size"], {"seconds": []}
        if req["op"] == "put":
            config = ReplicateConfig()
            config.preferred_segment = req.get("preferred", "")
            answer["codes"] = []
            for key in req["keys"]:
                start = time.monotonic()
                answer["codes"].append(store.put(key, value_of(key, size).tobytes(), config))
                answer["seconds"].append(time.monotonic() - start)
        else:
            answer["results"] = []
            for key in req["keys"]:
                buf[:size] = 0
                start = time.monotonic()
                got = store.get_into(key, ptr, size)
                answer["seconds"].append(time.monotonic() - start)
                if got == size:
                    same = np.array_equal(buf[:size], value_of(key, size))
                    answer["results"].append("ok" if same else "corrupt")
                else:
                    answer["results"].append(got)
        print(json.dumps(answer), flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
