"""Three "hosts" on one machine for the multi-host store tests: a network namespace each, joined
by veth links to a bridge in a fourth ("switch") namespace, so every address, route and link the
tests touch lives inside namespaces they created and removed. Host i has 10.77.0.i/24 on eth0;
`cut(host)` takes its switch port down (the cable pulled), `restore(host)` brings it back, and
`impair(host, ...)` slows or drops its packets (tc netem where the kernel has it, else tbf and
nftables). Needs root; `unavailable()` says why the tests must skip when it is missing."""

import os
import shutil
import signal
import subprocess

from kvtier._process import Child, stop_popen

SUBNET = "10.77.0"


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def unavailable():
    """None when namespaces can be made here, else the reason to skip."""
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    if shutil.which("ip") is None:
        return "iproute2 is not installed"
    probe = f"kvtprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as e:
        return f"cannot create a network namespace: {getattr(e, 'stderr', e)}"
    _ip("netns", "del", probe)
    return None


def _probe_qdisc(ns, *spec):
    """True when `tc qdisc add dev lo root <spec>` works in `ns` (the kernel has that qdisc)."""
    ok = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root",
                         *spec], capture_output=True, timeout=30).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"],
                       capture_output=True, timeout=30)
    return ok


class Hosts:
    """`names` hosts; `address(h)` is h's IP; `spawn(h, name, argv, log_path)` runs argv inside h
    as a kvtier._process.Child, `popen(h, argv, **kw)` as a Popen with the pipes asked for."""

    def __init__(self, names=("a", "b", "c")):
        tag = f"kvt{os.getpid()}"
        self.names = list(names)
        self.switch = f"{tag}sw"
        self._ns = {h: f"{tag}{h}" for h in self.names}
        self._procs = []     # Popen
        self._children = []  # Child

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, h in enumerate(self.names, start=1):
            ns = self._ns[h]
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.switch, "link", "add", self._port(h), "type", "veth", "peer", "name",
                "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", self._port(h), "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{i}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def _port(self, h):
        return f"to-{h}"

    def namespace(self, h):
        return self._ns[h]

    def address(self, h):
        return f"{SUBNET}.{self.names.index(h) + 1}"

    def spawn(self, h, name, argv, log_path=None):
        c = Child(name, ["ip", "netns", "exec", self._ns[h], *argv], log_path=log_path)
        self._children.append(c)
        return c

    def popen(self, h, argv, **kwargs):
        p = subprocess.Popen(["ip", "netns", "exec", self._ns[h], *argv], **kwargs)
        self._procs.append(p)
        return p

    def exited(self):
        """The argv of every process started here that has exited."""
        return ([c.argv for c in self._children if not c.alive()]
                + [p.args for p in self._procs if p.poll() is not None])

    def cut(self, h):
        _ip("-n", self.switch, "link", "set", self._port(h), "down")

    def restore(self, h):
        _ip("-n", self.switch, "link", "set", self._port(h), "up")

    def impair(self, h, delay_ms, loss_pct, rate_mbit):
        """Makes h's link slow and lossy; returns what was applied, in words. With netem: delay
        and loss on h's eth0. Without (this kernel may lack it): no added delay, loss from an
        nftables rule that drops that share of h's packets both ways, and a tbf rate limit."""
        ns = self._ns[h]
        if _probe_qdisc(ns, "netem", "delay", "1ms"):
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root",
                            "netem", "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%", "rate",
                            f"{rate_mbit}mbit"], check=True, capture_output=True, timeout=30)
            return f"netem delay {delay_ms} ms, loss {loss_pct}%, {rate_mbit} Mbit/s"
        if shutil.which("nft") is None:
            raise RuntimeError("neither tc netem nor nft is available to impair a link")
        rules = "\n".join([
            "table inet kvtier_impair {",
            f"  chain in {{ type filter hook input priority 0; iifname eth0 "
            f"numgen random mod 100 < {loss_pct} drop; }}",
            f"  chain out {{ type filter hook output priority 0; oifname eth0 "
            f"numgen random mod 100 < {loss_pct} drop; }}",
            "}"])
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True,
                       check=True, capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root",
                        "tbf", "rate", f"{rate_mbit}mbit", "burst", "64kb", "latency", "50ms"],
                       check=True, capture_output=True, timeout=30)
        return (f"no netem in this kernel: nftables drops {loss_pct}% of packets each way, "
                f"tbf {rate_mbit} Mbit/s, no added delay")

    def close(self):
        """Stops what popen started (SIGTERM, then SIGKILL) and deletes the namespaces, which
        takes their links and addresses with them."""
        for c in self._children:
            c.signal(signal.SIGTERM)  # all first, so they stop together
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for c in self._children:
            c.stop()
        for p in self._procs:
            stop_popen(p)
        for ns in [*self._ns.values(), self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
