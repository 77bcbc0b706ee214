"""The reference for kvtier's LMCache front (issue 38): LMCache's own multiprocess (MP) server,
`lmcache server` from the engine venv on 127.0.0.1 and CPU only, driven by the unchanged
lmcache MP client (RequestClientFactory + its lmcache-driven transfer context over POSIX shared
memory) through register -> store -> lookup -> prefetch status -> retrieve -> end session ->
unregister, with every byte of the KV cache checked afterwards.

A frame tap (a ZMQ ROUTER in front of the server, forwarding to it through a DEALER) records the
raw frames of that exchange so the shapes docs/lmcache-protocol.md states are asserted against the
real client and server: operation ids and names, part counts, void replies, msgpack maps keyed by
field name, ext type 1 holding a msgpack (not pickle) descriptor of the shared-memory wrapper, and
the server's chunk hashes (seen through its KV event stream) recomputed here from the tokens.
kvtier's front must produce and accept the same frames."""

import os
import struct
import sys
import threading
from pathlib import Path

import blake3
import msgspec
import pytest
import torch
import zmq

from kvtier._process import start_on_free_ports, wait_until


# run.py puts kvtier's `mooncake` package on the path; its `mooncake.engine` lets LMCache's
# transfer channels (imported by the MP client) load beside it (docs/mooncake-migration.md).
from lmcache.utils import EngineType
from lmcache.v1.multiprocess.custom_types import IPCCacheServerKey
from lmcache.v1.multiprocess.group_view import EngineGroupInfo
from lmcache.v1.multiprocess.transfer_context import create_transfer_context
from lmcache.v1.multiprocess.transport.factory import RequestClientFactory

CHUNK = 32  # tokens per LMCache chunk (the server's --chunk-size)
BLOCK = 16  # tokens per engine block: two blocks per chunk
LAYERS, NUM_BLOCKS, HEADS, HEAD_DIM = 2, 24, 2, 8
CHUNKS = 3
MODEL = "kvtier-reference"
INSTANCE = 4242
RPC_TIMEOUT_S = 30.0

# The frozen id table of lmcache 0.5.6 (transport/zmq_impl/wire.py) for the operations used here;
# subscribe_kv_events has no id and travels as its name.
OP_IDS = {"register_kv_cache": 1, "unregister_kv_cache": 2, "store": 6, "retrieve": 7,
          "lookup": 8, "query_prefetch_status": 9, "end_session": 13, "get_chunk_size": 21,
          "ping": 22}
# Parts after [uid, op]: one per positional argument of the RPC.
ARG_PARTS = {1: 7, 2: 1, 6: 4, 7: 5, 8: 2, 9: 1, 13: 1, 21: 0, 22: 1, "subscribe_kv_events": 4}
VOID_OPS = {1, 2, 8, 13}
KEY_FIELDS = {"model_name", "world_size", "worker_id", "token_ids", "start", "end", "request_id",
              "cache_salt", "request_configs", "num_kv_readers"}


_enc = msgspec.msgpack.encode
# Messages no server can answer (uids 1-4): an unknown op, one part too many, a retired id
# (query_prefetch_lookup_hits) and a part that is not msgpack. Both servers' tests send them.
BAD_FRAMES = [[_enc(1), _enc("no_such_operation")],
              [_enc(2), _enc(OP_IDS["get_chunk_size"]), _enc(0)],
              [_enc(3), _enc(11)],
              [_enc(4), _enc(OP_IDS["ping"]), b"\xc1"]]


def _server_env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the server needs nothing of kvtier (nor its `mooncake`)
    env.update(LMCACHE_DISABLE_BANNER="1", CUDA_VISIBLE_DEVICES="",
               # LMCache reports usage to stats.lmcache.ai unless told not to.
               LMCACHE_TRACK_USAGE="false", DO_NOT_TRACK="1")
    return env


@pytest.fixture(scope="module")
def lmcache_server():
    """`lmcache server` (ZMQ transport, lmcache-driven transfers) on two free loopback ports."""
    exe = Path(sys.executable).with_name("lmcache")

    def argv(port, http_port):
        return [exe, "server", "--host", "127.0.0.1", "--port", port,
                "--http-host", "127.0.0.1", "--http-port", http_port,
                "--chunk-size", CHUNK, "--l1-size-gb", "0.0625", "--no-l1-use-lazy",
                "--eviction-policy", "LRU", "--max-workers", "1", "--disable-metrics"]

    srv = start_on_free_ports(
        "lmcache-server", argv,
        lambda c, port, http_port: "LMCache cache server is running" in c.log_text(),
        timeout_s=180, n_ports=2, env=_server_env())
    srv.url = f"tcp://127.0.0.1:{srv.ports[0]}"
    yield srv
    srv.stop(timeout_s=30)


class FrameTap:
    """Forwards one client's frames to the server and records them: requests as the client's
    DEALER sent them, replies as the server's ROUTER sent them (both without the identity)."""

    def __init__(self, ctx, server_url):
        self.requests, self.replies = [], []
        self._ctx, self._server_url = ctx, server_url
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._thread = threading.Thread(target=self._run, name="frame-tap", daemon=True)
        self._thread.start()
        assert self._bound.wait(10), "frame tap did not bind"

    def _run(self):
        front = self._ctx.socket(zmq.ROUTER)
        back = self._ctx.socket(zmq.DEALER)
        try:
            self.url = f"tcp://127.0.0.1:{front.bind_to_random_port('tcp://127.0.0.1')}"
            back.connect(self._server_url)
            self._bound.set()
            poller = zmq.Poller()
            poller.register(front, zmq.POLLIN)
            poller.register(back, zmq.POLLIN)
            identity = None
            while not self._stop.is_set():
                for sock, _ in poller.poll(50):
                    if sock is front:
                        identity, *frames = front.recv_multipart()
                        self.requests.append(frames)
                        back.send_multipart(frames)
                    else:
                        frames = back.recv_multipart()
                        self.replies.append(frames)
                        front.send_multipart([identity, *frames])
        finally:
            front.close(linger=0)
            back.close(linger=0)

    def close(self):
        self._stop.set()
        self._thread.join(10)


def _decode_raw(frame):
    """A msgpack part as plain values, ext parts as (code, data) pairs."""
    return msgspec.msgpack.decode(frame, ext_hook=lambda code, data: (code, bytes(data)))


def _expected_chunk_hashes(tokens):
    """The server's default key hash (blake3), recomputed without LMCache: a chain over full
    chunks, each hash = blake3(previous 32-byte hash || the chunk's tokens as big-endian u32),
    seeded with blake3(int64 0 big-endian || u32 0)."""
    seed = blake3.blake3()
    seed.update((0).to_bytes(8, "big", signed=True))
    seed.update(struct.pack(">I", 0))
    prev, out = seed.digest(), []
    for i in range(0, len(tokens) - len(tokens) % CHUNK, CHUNK):
        h = blake3.blake3()
        h.update(prev)
        h.update(struct.pack(f">{CHUNK}I", *tokens[i:i + CHUNK]))
        prev = h.digest()
        out.append(prev)
    return out


def _key(tokens, request_id, worker_id):
    return IPCCacheServerKey(model_name=MODEL, world_size=1, worker_id=worker_id,
                             token_ids=tuple(tokens), start=0, end=CHUNKS * CHUNK,
                             request_id=request_id, num_kv_readers=1)


def _next_batch(stream, timeout_s=RPC_TIMEOUT_S):
    """next(stream) with a deadline (the client's stream read has none)."""
    out = []
    reader = threading.Thread(target=lambda: out.append(next(stream)), daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert out, f"no KV event batch within {timeout_s:g} s"
    return out[0]


def _tensor_bytes(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def _same_bytes(a, b):
    return torch.equal(a.contiguous().view(torch.int16), b.contiguous().view(torch.int16))



def register_worker(client, seed):
    """A CPU worker's paged KV cache registered through LMCache's transfer context, as its vLLM
    adapter does with lmcache_driven transfers; registration moves each tensor onto a POSIX shm
    object the server maps, so the random bytes (from `seed`) are written after it.
    Returns (kv, transfer)."""
    kv = {f"model.layers.{i}.attn": torch.zeros(2, NUM_BLOCKS, BLOCK, HEADS, HEAD_DIM,
                                                dtype=torch.bfloat16)
          for i in range(LAYERS)}
    transfer = create_transfer_context(kv, instance_id=INSTANCE, req_client=client,
                                       mode="lmcache_driven")
    transfer.register(kv, MODEL, 1, CHUNK // BLOCK, RPC_TIMEOUT_S,
                      layout_hints={"kv_layout": "NHD"},
                      engine_group_infos=[EngineGroupInfo(
                          engine_group_id=0, layer_indices=tuple(range(LAYERS)),
                          tokens_per_block=BLOCK)],
                      engine_type=EngineType.VLLM)
    gen = torch.Generator().manual_seed(seed)
    for t in kv.values():
        t.copy_(torch.randn(t.shape, generator=gen).to(torch.bfloat16))
    return kv, transfer


def retrieve_checked(transfer, kv, tokens, rid, src):
    """RETRIEVE into the last blocks, zeroed first; afterwards they must hold the bytes of the
    `src` blocks and every other byte must be unchanged."""
    dst = list(range(NUM_BLOCKS - CHUNKS * CHUNK // BLOCK, NUM_BLOCKS))
    want = {}
    for name, t in kv.items():
        want[name] = t.clone()
        want[name][:, dst] = t[:, src]
        t[:, dst] = 0
    retrieve = transfer.submit_retrieve(rid, _key(tokens, rid, 0), kv, [dst],
                                        transfer.create_recorded_event(), CHUNK // BLOCK)
    assert retrieve.result(timeout=RPC_TIMEOUT_S) is True
    for name, t in kv.items():
        assert _same_bytes(t, want[name]), name


def test_store_lookup_retrieve_through_lmcache_server_on_cpu_shm(lmcache_server):
    ctx = zmq.Context()
    tap = FrameTap(ctx, lmcache_server.url)
    client = RequestClientFactory.create(tap.url, context=ctx)
    transfer = None
    try:
        assert client.get_chunk_size().result(timeout=RPC_TIMEOUT_S) == CHUNK
        assert client.ping(None).result(timeout=RPC_TIMEOUT_S) is True

        kv, transfer = register_worker(client, 38)
        gen = torch.Generator().manual_seed(39)
        # The descriptor's shm name is all the server gets: that object holds the tensor's bytes.
        (register,) = [r for r in tap.requests if r[1] == msgspec.msgpack.encode(1)]
        for (_, data), t in zip(_decode_raw(register[3]), kv.values()):
            name = msgspec.msgpack.decode(data)["shm_name"]
            assert Path("/dev/shm", name.lstrip("/")).read_bytes() == _tensor_bytes(t), name

        tokens = torch.randint(1, 50000, (CHUNKS * CHUNK + 5,), generator=gen).tolist()
        src = list(range(1, 1 + CHUNKS * CHUNK // BLOCK))  # block 0 is vLLM's null block
        store = transfer.submit_store("store-req", _key(tokens, "store-req", 0), kv, [src],
                                      transfer.create_recorded_event(), CHUNK // BLOCK)
        assert store.result(timeout=RPC_TIMEOUT_S) is True

        # The server's KV event stream names each stored chunk by its key hash.
        stream = client.subscribe_kv_events(INSTANCE, MODEL, 0, 64)
        events = []
        while len(events) < CHUNKS:
            events.extend(e for e in _next_batch(stream).events if e.kind == "stored")
        stream.close()
        expected = _expected_chunk_hashes(tokens)
        assert [e.block_hashes for e in events] == [[h] for h in expected]
        assert [e.parent_block_hash for e in events] == [None, *expected[:-1]]
        assert [e.token_ids for e in events] == [tokens[i * CHUNK:(i + 1) * CHUNK]
                                                 for i in range(CHUNKS)]

        # LOOKUP is void; the hit count comes from QUERY_PREFETCH_STATUS, exactly once (a second
        # query of a consumed request answers 0, not None). A STORE's reply comes before its
        # chunks are committed, so a lookup is repeated until they are.
        attempts = []
        client_hits = {}

        def query(rid):
            result = client.query_prefetch_status(rid).result(timeout=RPC_TIMEOUT_S)
            if result is not None:
                client_hits[rid] = result
            return result

        def looked_up_once():
            rid = f"lookup-{len(attempts)}"
            attempts.append(rid)
            assert client.lookup(_key(tokens, rid, None), 1).result(
                timeout=RPC_TIMEOUT_S) is None
            wait_until(lambda: query(rid) is not None, 30, "prefetch status")
            if client_hits[rid] == CHUNKS:
                return rid
            client.end_session(rid).result(timeout=RPC_TIMEOUT_S)
            return None

        rid = wait_until(looked_up_once, 30, "a lookup that finds every stored chunk")
        assert client.query_prefetch_status(rid).result(timeout=RPC_TIMEOUT_S) == 0

        retrieve_checked(transfer, kv, tokens, rid, src)

        assert client.end_session(rid).result(timeout=RPC_TIMEOUT_S) is None
        assert transfer.unregister().result(timeout=RPC_TIMEOUT_S) is None
    finally:
        if transfer is not None:
            transfer.close()
        client.close()
        tap.close()
        ctx.term()

    _check_frames(tap, tokens, kv_shape=(2, NUM_BLOCKS, BLOCK, HEADS, HEAD_DIM))


def _check_frames(tap, tokens, kv_shape):
    # Stream control frames, [uid, b"", b"ack" | b"cancel"], travel apart from requests.
    controls = [r for r in tap.requests if r[1] == b""]
    requests = [r for r in tap.requests if r[1] != b""]
    replies = tap.replies
    ops = [_decode_raw(r[1]) for r in requests]
    uids = [_decode_raw(r[0]) for r in requests]
    # One DEALER, no empty delimiter frame; uid is the client's counter from 0.
    assert uids == list(range(len(requests)))
    assert ops[:4] == [OP_IDS["get_chunk_size"], OP_IDS["ping"], OP_IDS["register_kv_cache"],
                       OP_IDS["store"]]
    assert ops[-2:] == [OP_IDS["end_session"], OP_IDS["unregister_kv_cache"]]
    assert "subscribe_kv_events" in ops and OP_IDS["lookup"] in ops
    assert OP_IDS["query_prefetch_status"] in ops and OP_IDS["retrieve"] in ops
    for req, op in zip(requests, ops):
        assert len(req) == 2 + ARG_PARTS[op], (op, len(req))

    by_uid = {}
    for rep in replies:
        by_uid.setdefault(rep[0], []).append(rep)
    for req, op in zip(requests, ops):
        if op == "subscribe_kv_events":
            continue
        (rep,) = by_uid[req[0]]
        assert rep[:2] == req[:2]  # uid and op echoed byte for byte
        assert len(rep) == (2 if op in VOID_OPS else 3), (op, rep)
        if op == OP_IDS["query_prefetch_status"]:
            assert len(rep) in (2, 3)  # 2: still running (None)

    def first(op):
        return requests[ops.index(op)]

    # REGISTER_KV_CACHE: [instance_id, [ext 1 per layer], model, world_size, engine_type,
    # layout_hints, engine_group_infos].
    reg = [_decode_raw(p) for p in first(OP_IDS["register_kv_cache"])[2:]]
    assert reg[0] == INSTANCE and reg[2:5] == [MODEL, 1, "vllm"]
    assert reg[5] == {"kv_layout": "NHD"}
    assert reg[6] == [{"engine_group_id": 0, "layer_indices": list(range(LAYERS)),
                       "tokens_per_block": BLOCK, "sw_size_tokens": -1,
                       "extra_object_group_tag": 0, "recurrent_state": False}]
    assert len(reg[1]) == LAYERS
    elem = torch.empty(0, dtype=torch.bfloat16).element_size()
    for code, data in reg[1]:
        assert code == 1
        assert data[0] != 0x80, "a pickle; lmcache 0.5.6 sends a msgpack descriptor"
        desc = msgspec.msgpack.decode(data)
        assert set(desc) == {"type", "version", "metadata", "shm_name", "nbytes"}
        assert desc["type"] == "cpu_shm" and desc["version"] == 1
        assert desc["metadata"] == {
            "dtype": "bfloat16", "shape": list(kv_shape),
            "stride": list(torch.empty(kv_shape).stride()), "storage_offset": 0,
            "device_uuid": "cpu"}
        assert desc["shm_name"].startswith("/lmcache_kv_")
        assert desc["nbytes"] == torch.Size(kv_shape).numel() * elem

    # STORE: [key map, instance_id, [[block ids] per group], event handle]; reply [handle, ok].
    store = [_decode_raw(p) for p in first(OP_IDS["store"])[2:]]
    assert set(store[0]) == KEY_FIELDS
    assert store[0]["token_ids"] == tokens and store[0]["worker_id"] == 0
    assert store[0]["num_kv_readers"] == 1 and store[0]["cache_salt"] == ""
    assert store[1] == INSTANCE and store[2] == [list(range(1, 1 + CHUNKS * CHUNK // BLOCK))]
    assert isinstance(store[3], bytes)
    handle, ok = _decode_raw(by_uid[first(OP_IDS["store"])[0]][0][2])
    assert isinstance(handle, bytes) and ok is True

    lookup = [_decode_raw(p) for p in first(OP_IDS["lookup"])[2:]]
    assert set(lookup[0]) == KEY_FIELDS and lookup[0]["worker_id"] is None and lookup[1] == 1

    retrieve = [_decode_raw(p) for p in first(OP_IDS["retrieve"])[2:]]
    assert retrieve[0]["worker_id"] == 0 and retrieve[1] == INSTANCE
    assert isinstance(retrieve[3], bytes) and retrieve[4] == 0  # skip_first_n_tokens
    handle, ok = _decode_raw(by_uid[first(OP_IDS["retrieve"])[0]][0][2])
    assert isinstance(handle, bytes) and ok is True

    # A stream: one reply per batch on the request's uid, then [uid, op] alone at its end; the
    # client paces it with [uid, b"", b"ack"] and stops it with [uid, b"", b"cancel"].
    sub = first("subscribe_kv_events")
    assert [_decode_raw(p) for p in sub[2:]] == [INSTANCE, MODEL, 0, 64]
    assert all(r[:2] == sub[:2] for r in by_uid[sub[0]])
    assert all(len(r) == 3 for r in by_uid[sub[0]][:-1])
    assert controls and all(c[0] == sub[0] and c[2] in (b"ack", b"cancel") for c in controls)
    assert controls[-1][2] == b"cancel"


def test_frames_the_server_cannot_answer_get_no_reply(lmcache_server):
    """No error reply exists: an unknown op, a wrong part count or malformed msgpack is logged
    and dropped. The main loop handles synchronous ops in order, so the first reply after them
    is the NOOP sent last."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.connect(lmcache_server.url)
    enc = msgspec.msgpack.encode
    try:
        for frames in BAD_FRAMES:
            sock.send_multipart(frames)
        sock.send_multipart([enc(5), enc(OP_IDS["query_prefetch_status"]), enc("never-seen")])
        sock.send_multipart([enc(6), enc(24)])  # noop
        assert sock.poll(int(RPC_TIMEOUT_S * 1000)), "no reply at all"
        first = sock.recv_multipart()
        assert first in ([enc(5), enc(9), enc(0)], [enc(6), enc(24), enc("OK")]), first
        rest = [] if first[0] == enc(6) else [sock.recv_multipart()]
        assert rest in ([], [[enc(6), enc(24), enc("OK")]]), rest
    finally:
        sock.close(linger=0)
        ctx.term()
    log = lmcache_server.log_text()
    assert "No handler registered for operation no_such_operation" in log
    assert "Unknown legacy ZMQ operation id: 11" in log
