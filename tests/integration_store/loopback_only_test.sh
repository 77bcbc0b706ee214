#!/bin/bash
# The store on a host whose only interface is loopback (a fresh network namespace), with the
# default ports and flags: master, node, and a Python dummy client that puts and gets. Also
# checks that no listener of the master or the node is bound to anything but 127.0.0.1.
# Needs root for `unshare -n`; skipped (77) otherwise.
# Usage: loopback_only_test.sh <kvtier binary> <build/python dir>
set -euo pipefail
bin=$1 pydir=$2
if ! unshare -n true 2>/dev/null; then
  echo "skipped: cannot create a network namespace (needs root)"
  exit 77
fi
exec unshare -n bash -s "$bin" "$pydir" <<'INNER'
set -euo pipefail
bin=$1 pydir=$2
ip link set lo up
"$bin" master --log-level error & master=$!
"$bin" node --global-segment-size 64MB --no-prefault --http-port 9300 --log-level error & node=$!
trap 'kill $node $master 2>/dev/null; wait 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:9300/status | grep -q '"mounted": true' && break
  sleep 0.1
done
PYTHONPATH=$pydir /usr/bin/python3 - <<'PY'
from kvtier.store import DistributedStore
s = DistributedStore()
assert s.setup_dummy(16 << 20, 16 << 20, "127.0.0.1:50052") == 0
value = bytes(range(256)) * 4096
assert s.put("loopback-only", value) == 0
assert s.get("loopback-only") == value
assert s.close() == 0
print("put/get through the default ports: ok")
PY
# Every TCP listener of the two processes is on 127.0.0.1.
listeners=$(ss -Hltnp | grep -E "pid=($master|$node)," | awk '{print $4}')
echo "listeners: $(echo $listeners)"
[ -n "$listeners" ]
if echo "$listeners" | grep -vq '^127\.0\.0\.1:'; then
  echo "FAIL: a listener is not bound to 127.0.0.1"
  exit 1
fi
echo ok
INNER
