"""kvtier as a drop-in for `lmcache server` (issue 38): a real `kvtier server` with its LMCache
front (`--lmcache-port`), driven by the unchanged lmcache 0.5.6 MP client exactly as
test_lmcache_mp_reference.py drives LMCache's own server: register -> store -> lookup ->
prefetch status -> retrieve -> end session -> unregister over POSIX shared memory, every byte of
the KV cache checked, and the raw frames recorded through the reference's frame tap and held to
the shapes the reference asserts for LMCache's server. Then frames no 0.5.6 client sends: no
reply (LMCache has none), a log line and a metric, and the server answers the next request.

What differs from the reference, on purpose: kvtier advertises no experimental features (so no
KV event stream is opened), and a STORE's chunks are findable as soon as its reply arrives, so
the first LOOKUP finds them all."""

import os
import re
import urllib.request

import msgspec
import pytest
import torch
import zmq

from kvtier._process import start_on_free_ports, tcp_open, wait_until
from test_lmcache_mp_reference import (ARG_PARTS, BAD_FRAMES, BLOCK, CHUNK, CHUNKS, KEY_FIELDS,
                                       OP_IDS, RPC_TIMEOUT_S, VOID_OPS, FrameTap,
                                       RequestClientFactory, _decode_raw, _key, _tensor_bytes,
                                       register_worker, retrieve_checked)

GET_EXPERIMENTAL, NOOP = 32, 24


def _start_kvtier(*extra, lmcache_flags=False):
    """`kvtier server` with the LMCache front, on three free loopback ports (RPC, HTTP, LMCache);
    with `lmcache_flags`, started the way an `lmcache server` command line is swapped for kvtier
    (`--protocol lmcache` and lmcache's own flags, docs/lmcache-migration.md)."""
    exe = os.environ["KVTIER_BIN"]

    def argv(port, http_port, lmcache_port):
        if lmcache_flags:
            return [exe, "server", "--port", port, "--no-l1-prefault", *extra, "--protocol",
                    "lmcache", "--host", "127.0.0.1", "--port", lmcache_port, "--http-port",
                    http_port, "--chunk-size", CHUNK, "--l1-size-gb", "0.0625"]
        return [exe, "server", "--host", "127.0.0.1", "--port", port, "--http-port", http_port,
                "--lmcache-port", lmcache_port, "--chunk-size", CHUNK, "--l1-size-gb", "0.0625",
                "--no-l1-prefault", *extra]

    srv = start_on_free_ports(
        "kvtier-lmcache", argv,
        lambda c, port, http_port, lmcache_port: "listening" in c.log_text()
        and tcp_open(lmcache_port),
        timeout_s=60, n_ports=3)
    srv.url = f"tcp://127.0.0.1:{srv.ports[2]}"
    srv.metrics_url = f"http://127.0.0.1:{srv.ports[1]}/metrics"
    return srv


@pytest.fixture(scope="module", params=["--lmcache-port", "--protocol lmcache"])
def kvtier_lmcache(request):
    srv = _start_kvtier(lmcache_flags=request.param == "--protocol lmcache")
    yield srv
    srv.stop(timeout_s=30)


def _metric(srv, name, **labels):
    """The sum of a metric's series that carry all of `labels` (all its series without)."""
    text = urllib.request.urlopen(srv.metrics_url, timeout=10).read().decode()
    want = [f'{k}="{v}"' for k, v in labels.items()]
    found = re.findall(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", text, re.MULTILINE)
    return sum(float(v) for have, v in found if all(w in have.split(",") for w in want))


def _lookup_hits(client, tokens, rid):
    """LOOKUP, then QUERY_PREFETCH_STATUS until it answers (None while the job runs)."""
    assert client.lookup(_key(tokens, rid, None), 1).result(timeout=RPC_TIMEOUT_S) is None
    hits = []

    def answered():
        result = client.query_prefetch_status(rid).result(timeout=RPC_TIMEOUT_S)
        if result is not None:
            hits.append(result)
        return result is not None

    wait_until(answered, 30, "prefetch status")
    return hits[0]


def test_store_lookup_retrieve_through_kvtier_on_cpu_shm(kvtier_lmcache):
    ctx = zmq.Context()
    tap = FrameTap(ctx, kvtier_lmcache.url)
    client = RequestClientFactory.create(tap.url, context=ctx)
    transfer = None
    try:
        assert client.get_chunk_size().result(timeout=RPC_TIMEOUT_S) == CHUNK
        assert client.ping(None).result(timeout=RPC_TIMEOUT_S) is True
        assert client.get_experimental().result(timeout=RPC_TIMEOUT_S) == []

        kv, transfer = register_worker(client, 38)
        gen = torch.Generator().manual_seed(3838)
        tokens = torch.randint(1, 50000, (CHUNKS * CHUNK + 5,), generator=gen).tolist()
        src = list(range(1, 1 + CHUNKS * CHUNK // BLOCK))  # block 0 is vLLM's null block
        store = transfer.submit_store("store-req", _key(tokens, "store-req", 0), kv, [src],
                                      transfer.create_recorded_event(), CHUNK // BLOCK)
        assert store.result(timeout=RPC_TIMEOUT_S) is True

        # LOOKUP is void; QUERY_PREFETCH_STATUS answers None while the job runs, the hit count
        # once, then 0. kvtier's STORE reply comes after its chunks are published.
        rid = "lookup-0"
        assert _lookup_hits(client, tokens, rid) == CHUNKS
        assert client.query_prefetch_status(rid).result(timeout=RPC_TIMEOUT_S) == 0
        assert client.query_prefetch_status("never-seen").result(timeout=RPC_TIMEOUT_S) == 0
        retrieve_checked(transfer, kv, tokens, rid, src)

        assert client.end_session(rid).result(timeout=RPC_TIMEOUT_S) is None
        # The worker's tensors still live in the shm objects kvtier mapped.
        (register,) = [r for r in tap.requests if r[1] == msgspec.msgpack.encode(1)]
        for (_, data), t in zip(_decode_raw(register[3]), kv.values()):
            name = msgspec.msgpack.decode(data)["shm_name"]
            with open(f"/dev/shm/{name.lstrip('/')}", "rb") as f:
                assert f.read() == _tensor_bytes(t), name
        assert transfer.unregister().result(timeout=RPC_TIMEOUT_S) is None
    finally:
        if transfer is not None:
            transfer.close()
        client.close()
        tap.close()
        ctx.term()

    _check_frames(tap, tokens)
    assert _metric(kvtier_lmcache, "kvtier_lmcache_requests_total", op="store") == 1
    assert _metric(kvtier_lmcache, "kvtier_retrieve_hit_chunks_total") == CHUNKS


def _check_frames(tap, tokens):
    """The reference's frame shapes, held to kvtier's replies."""
    ops = [_decode_raw(r[1]) for r in tap.requests]
    assert [_decode_raw(r[0]) for r in tap.requests] == list(range(len(tap.requests)))
    assert ops[:5] == [OP_IDS["get_chunk_size"], OP_IDS["ping"], GET_EXPERIMENTAL,
                       OP_IDS["register_kv_cache"], OP_IDS["store"]]
    assert ops[-2:] == [OP_IDS["end_session"], OP_IDS["unregister_kv_cache"]]
    parts = {**ARG_PARTS, GET_EXPERIMENTAL: 0}
    by_uid = {}
    for rep in tap.replies:
        by_uid.setdefault(rep[0], []).append(rep)
    for req, op in zip(tap.requests, ops):
        assert len(req) == 2 + parts[op], (op, len(req))
        (rep,) = by_uid[req[0]]
        assert rep[:2] == req[:2]  # uid and op echoed byte for byte
        if op == OP_IDS["query_prefetch_status"]:
            assert len(rep) in (2, 3)  # 2: still running (None)
        else:
            assert len(rep) == (2 if op in VOID_OPS else 3), (op, rep)
    store = [_decode_raw(p) for p in tap.requests[ops.index(OP_IDS["store"])][2:]]
    assert set(store[0]) == KEY_FIELDS and store[0]["token_ids"] == tokens
    for op in (OP_IDS["store"], OP_IDS["retrieve"]):
        handle, ok = _decode_raw(by_uid[tap.requests[ops.index(op)][0]][0][2])
        assert handle == b"" and ok is True  # copied before the reply: no event to wait on


def test_frames_kvtier_cannot_take_get_no_reply_and_the_next_is_answered(kvtier_lmcache):
    """As LMCache's server: an unknown op, a wrong part count, a retired id or malformed msgpack
    get no reply; unlike it, a one-frame message does not stop the server answering."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(kvtier_lmcache.url)
    enc = msgspec.msgpack.encode
    try:
        for frames in BAD_FRAMES:
            sock.send_multipart(frames)
        sock.send_multipart([enc(5)])  # a uid alone
        sock.send_multipart([enc(6), enc(NOOP)])
        assert sock.poll(int(RPC_TIMEOUT_S * 1000)), "no reply at all"
        assert sock.recv_multipart() == [enc(6), enc(NOOP), enc("OK")]
        sock.send_multipart([enc(7), enc(OP_IDS["get_chunk_size"])])
        assert sock.poll(int(RPC_TIMEOUT_S * 1000)), "no reply after the bad frames"
        assert sock.recv_multipart() == [enc(7), enc(OP_IDS["get_chunk_size"]), enc(CHUNK)]
    finally:
        sock.close(linger=0)
        ctx.term()
    assert "LMCache client protocol not supported" in kvtier_lmcache.log_text()
    for reason in ("unknown_op", "part_count", "unsupported_op", "bad_msgpack", "bad_frame"):
        assert _metric(kvtier_lmcache, "kvtier_lmcache_refused_requests_total",
                       reason=reason) >= 1, reason
    assert kvtier_lmcache.alive()


def test_l2_hits_survive_a_server_restart(tmp_path):
    """Chunk keys are kvtier's own hashes, the same after a restart: what one server wrote to
    its L2 (an fs adapter) is found, loaded and retrieved byte for byte by the next one."""
    l2 = ["--l2-adapter", f'{{"type":"fs","path":"{tmp_path}"}}']
    gen = torch.Generator().manual_seed(1038)
    tokens = torch.randint(1, 50000, (CHUNKS * CHUNK,), generator=gen).tolist()
    src = list(range(1, 1 + CHUNKS * CHUNK // BLOCK))
    stored = {}
    for life in range(2):
        srv = _start_kvtier(*l2)
        ctx = zmq.Context()
        client = RequestClientFactory.create(srv.url, context=ctx)
        transfer = None
        try:
            kv, transfer = register_worker(client, 2038 + life)
            if life == 0:
                store = transfer.submit_store("w", _key(tokens, "w", 0), kv, [src],
                                              transfer.create_recorded_event(), CHUNK // BLOCK)
                assert store.result(timeout=RPC_TIMEOUT_S) is True
                stored = {name: t.clone() for name, t in kv.items()}
                wait_until(lambda: _metric(srv, "kvtier_l2_write_keys_total") >= CHUNKS, 30,
                           "the chunks in L2")
            else:
                # A fresh L1 and a fresh worker. Its `src` blocks get the first life's bytes only
                # as the expectation: the retrieve writes the (zeroed) other blocks from L2.
                assert _metric(srv, "kvtier_l2_write_keys_total") == 0
                for name, t in kv.items():
                    t[:, src] = stored[name][:, src]
                assert _lookup_hits(client, tokens, "after-restart") == CHUNKS
                retrieve_checked(transfer, kv, tokens, "after-restart", src)
        finally:
            if transfer is not None:
                transfer.close()
            client.close()
            ctx.term()
            srv.stop(timeout_s=30)
