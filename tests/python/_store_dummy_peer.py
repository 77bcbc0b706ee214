"""One side of the two-dummy exchange in test_store.py (Mooncake's multi-dummy scenario), run as
its own process: python _store_dummy_peer.py client1|client2 NODE_ADDRESS KEY_PREFIX

client1 puts its key, then waits for client2's and checks it; client2 waits for client1's key,
checks it, then puts its own. Checking a key: get_size, get (byte for byte), a put of the same
key returns 0, and once the read lease has run out remove returns 0 and the key is gone. Exits 0
on success; any failed check raises (exit 1) with the reason on stderr.
"""

import sys

from kvtier._process import wait_until
from kvtier.store import DistributedStore, ErrorCode

VALUE_BYTES = 1 << 20
WAIT_S = 30.0


def value_of(key):
    seed = key.encode()
    return (seed * (VALUE_BYTES // len(seed) + 1))[:VALUE_BYTES]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_for(store, key):
    def exists():
        found = store.is_exist(key)
        check(found in (0, 1), f"is_exist({key}) = {found}")
        return found == 1
    wait_until(exists, WAIT_S, f"{key} to appear")


def check_and_remove(store, key):
    expected = value_of(key)
    check(store.get_size(key) == len(expected), f"get_size({key}) = {store.get_size(key)}")
    got = store.get(key)
    check(got == expected, f"get({key}) returned {len(got)} bytes that differ")
    check(store.put(key, b"a different value") == 0, "a put of an existing key must return 0")
    check(store.get(key) == expected, "a second put must not overwrite the object")
    # The reads above took a lease; remove succeeds once it has run out.
    codes = []

    def lease_over():
        codes.append(store.remove(key))
        return codes[-1] != ErrorCode.OBJECT_HAS_LEASE
    wait_until(lease_over, WAIT_S, f"the read lease on {key} to end")
    check(codes[-1] == 0, f"remove({key}) = {codes[-1]}")
    check(store.is_exist(key) == 0, f"{key} still exists after remove")
    check(store.remove(key) == ErrorCode.OBJECT_NOT_FOUND, "a second remove must be -704")


def main():
    role, address, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    other = {"client1": "client2", "client2": "client1"}[role]
    mine_key, other_key = f"{prefix}_{role}", f"{prefix}_{other}"
    store = DistributedStore()
    check(store.setup_dummy(16 << 20, 4 << 20, address) == 0, "setup_dummy failed")
    if role == "client1":
        check(store.put(mine_key, value_of(mine_key)) == 0, f"put({mine_key}) failed")
        wait_for(store, other_key)
        check_and_remove(store, other_key)
    else:
        wait_for(store, other_key)
        check_and_remove(store, other_key)
        check(store.put(mine_key, value_of(mine_key)) == 0, f"put({mine_key}) failed")
    check(store.close() == 0, "close failed")
    print(f"{role}: ok")


if __name__ == "__main__":
    main()
