"""Two worker processes (ranks of one tensor-parallel model) and a scheduler client."""

import multiprocessing as mp

import numpy as np

import _workers
from conftest import CHUNK


def test_two_ranks_round_trip(server, client, uid):
    model, rid = f"tp-model-{uid}", f"req-{uid}"
    tokens = np.arange(uid, uid + 4 * CHUNK, dtype=np.uint32)
    stored_by_rank = {0: 4 * CHUNK, 1: 2 * CHUNK}  # rank 1 lags: only 2 chunks are complete

    ctx = mp.get_context("spawn")  # fresh interpreters: no forked ZMQ state
    procs, pipes = [], []
    for rank in (0, 1):
        parent, child = ctx.Pipe()
        args = (child, server.port, model, uid + rank, 2, rank, tokens.tolist(),
                stored_by_rank[rank], rid)
        p = ctx.Process(target=_workers.rank_main, args=args, daemon=True)
        p.start()
        procs.append(p)
        pipes.append(parent)
    try:
        for rank, conn in enumerate(pipes):
            assert conn.poll(30), f"rank {rank} did not store in time"
            msg = conn.recv()
            assert msg[0] == "stored", msg
            assert msg[1]["stored_chunks"] == stored_by_rank[rank] // CHUNK

        # The scheduler sees only the chunks every rank has.
        client.lookup(model, 2, tokens, request_id=rid)
        hits = client.wait_prefetch(rid)
        assert hits == 2
        assert client.query_prefetch_status(rid) == 2

        for conn in pipes:
            conn.send(hits * CHUNK)
        for rank, conn in enumerate(pipes):
            assert conn.poll(30), f"rank {rank} did not retrieve in time"
            msg = conn.recv()
            assert msg == ("retrieved", hits, True, True), f"rank {rank}: {msg}"
    finally:
        client.end_session(rid)
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
