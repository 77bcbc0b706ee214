"""Master failover under etcd (issue 18 item 3, docs/store/failover.md): two `kvtier master`
candidates share a real etcd, a node follows the leader through `--master etcd://...`, and a dummy
client writes all along. The leader is killed (SIGKILL) twice: each time the standby takes over
within a few seconds, every object written before reads back byte for byte, and each write in
flight either landed whole or failed. KVTIER_LONG=1 (make test-long) writes more and larger
objects."""

import os
import threading
import time

import pytest

from etcd_process import EtcdProcess, etcd_get
from kvtier._process import free_port, tcp_open, wait_until
from launchers import spawn_kvtier, start_node
from kvtier.store import DistributedStore, MooncakeDistributedStore

LONG = os.environ.get("KVTIER_LONG") == "1"
KEYS = 200 if LONG else 30
VALUE_BYTES = (1 << 20) if LONG else (64 << 10)
LEASE_S = 2
# At most this many in-flight puts per failover, 20 ms apart: together with the rest they stay
# far below the segment's eviction watermark, so every object acknowledged is still there.
INFLIGHT_MAX = 400
INFLIGHT_BEFORE = 20  # puts the writer has answered before the kill, and after the takeover
SEGMENT = "2GB" if LONG else "256MB"
CLUSTER = "failover-test"
LEADER_KEY = f"/kvtier/{CLUSTER}/leader"
# A liveness bound, not a performance one: the takeover is measured and printed.
TAKEOVER_WITHIN_S = 30

pytestmark = pytest.mark.skipif(not EtcdProcess.available(), reason="no /usr/bin/etcd")


def _value(key):
    seed = key.encode()
    return (seed * (VALUE_BYTES // len(seed) + 1))[:VALUE_BYTES]


class Masters:
    """The candidates, by RPC port; start() adds one."""

    def __init__(self, etcd):
        self.etcd = etcd
        self.procs = {}

    def start(self):
        port = free_port()
        proc = spawn_kvtier(f"master-{port}", [
            "master", "--host", "127.0.0.1", "--port", str(port), "--http-port", "0",
            "--etcd-endpoints", self.etcd.endpoint, "--cluster-id", CLUSTER,
            "--etcd-lease-ttl-s", str(LEASE_S), "--log-level", "info"])
        self.procs[port] = proc
        return port

    def leader(self):
        value = etcd_get(self.etcd.endpoint, LEADER_KEY)
        return int(value.decode().rsplit(":", 1)[1]) if value else None

    def wait_leader(self, not_port=None, timeout_s=TAKEOVER_WITHIN_S):
        def serving_leader():
            port = self.leader()
            return port if port is not None and port != not_port and tcp_open(port) else None
        return wait_until(serving_leader, timeout_s, "a master to take over")

    def kill(self, port):
        self.procs[port].kill()

    def logs(self):
        return "\n".join(f"--- {p.name} ---\n{p.log_text()[-4000:]}" for p in self.procs.values())

    def stop(self):
        for p in self.procs.values():
            p.stop()


class Writer(threading.Thread):
    """Puts new keys without pause; remembers what each put answered."""

    def __init__(self, node_address, tag):
        super().__init__(daemon=True)
        self.tag = tag
        self.store = DistributedStore()
        assert self.store._setup_dummy(0, 1 << 20, node_address)[0] == 0
        self.results = {}  # key -> put's return code
        self.stopping = threading.Event()

    def run(self):
        for i in range(INFLIGHT_MAX):
            if self.stopping.wait(0.02):
                return
            key = f"inflight-{self.tag}-{i}"
            self.results[key] = self.store.put(key, _value(key))

    def stop(self):
        self.stopping.set()
        self.join(60)
        self.store.close()


def _check_all(store, keys):
    for key in keys:
        got = store.get(key)
        assert got == _value(key), f"{key}: {len(got)} bytes, not its {VALUE_BYTES}"


def _check_inflight(store, results):
    landed = failed_absent = failed_whole = 0
    for key, rc in results.items():
        got = store.get(key)
        if rc == 0:
            assert got == _value(key), f"{key} was acknowledged but reads {len(got)} bytes"
            landed += 1
        elif got:
            assert got == _value(key), f"{key} failed ({rc}) and reads a torn value"
            failed_whole += 1
        else:
            failed_absent += 1
    return landed, failed_absent, failed_whole


def test_standby_takes_over_and_serves_every_object():
    with EtcdProcess() as etcd:
        masters = Masters(etcd)
        node = writer = store = None
        try:
            first = masters.start()
            assert masters.wait_leader() == first
            masters.start()  # the standby
            node = start_node(f"etcd://{etcd.endpoint}/{CLUSTER}", ["--log-level", "info"],
                              segment=SEGMENT, timeout_s=30)
            node_port = node.port
            store = DistributedStore()
            assert store._setup_dummy(0, 1 << 20, f"127.0.0.1:{node_port}")[0] == 0
            node.wait_ready(lambda: store.put("probe", b"x") == 0, 30, "a first put")

            written = []
            for term in range(2):
                batch = [f"term{term}-{i}" for i in range(KEYS)]
                for key in batch:
                    assert store.put(key, _value(key)) == 0, key
                written += batch
                writer = Writer(f"127.0.0.1:{node_port}", term)
                writer.start()
                # Writes in flight when the leader dies.
                wait_until(lambda: len(writer.results) >= INFLIGHT_BEFORE, 30, "in-flight puts")
                leader = masters.leader()
                killed_at = time.monotonic()
                masters.kill(leader)
                new_leader = masters.wait_leader(not_port=leader)
                elected_s = time.monotonic() - killed_at
                # Service is back when a put through the node lands again.
                node.wait_ready(lambda: store.put(f"after-{term}", _value(f"after-{term}")) == 0,
                                TAKEOVER_WITHIN_S, "a put after the takeover")
                takeover_s = time.monotonic() - killed_at
                # And writes under the new leader before the writer stops.
                after = len(writer.results)
                wait_until(lambda: len(writer.results) >= after + INFLIGHT_BEFORE, 30,
                           "puts under the new leader")
                writer.stop()
                landed, absent, whole = _check_inflight(store, writer.results)
                print(f"term {term}: leader :{leader} killed; :{new_leader} leads after "
                      f"{elected_s:.2f} s and a put lands after {takeover_s:.2f} s (lease "
                      f"{LEASE_S} s); in-flight puts: {landed} landed, {absent} failed and absent, "
                      f"{whole} failed but whole")
                assert landed > 0
                _check_all(store, written + [f"after-{term}"])
                written.append(f"after-{term}")
                if term == 0:
                    masters.start()  # the killed one's replacement, a standby now
            # Mooncake's API in an engine process, given the etcd form of master_server_address.
            with MooncakeDistributedStore() as embedded:
                assert embedded.setup("127.0.0.1", "P2PHANDSHAKE", "16MB", "16MB", "tcp", "",
                                      f"etcd://{etcd.endpoint}/{CLUSTER}") == 0
                for key in written[:5] + written[-5:]:
                    assert embedded.get(key) == _value(key), key
        except BaseException:
            print(masters.logs())
            if node is not None:
                print(f"--- node ---\n{node.log_text()[-4000:]}")
            raise
        finally:
            if writer is not None and writer.is_alive():
                writer.stop()
            if store is not None:
                store.close()
            if node is not None:
                node.stop()
            masters.stop()
