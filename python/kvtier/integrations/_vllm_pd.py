"""Prefill/decode disaggregation over one kvtier server: what the ``kv_transfer_params`` of a
prefill engine's response say, and how a decode engine reads them.

vLLM's P/D proxies send a request to a prefill engine with ``max_tokens`` 1 and
``kv_transfer_params`` ``{"do_remote_decode": true, ...}``, then send it to a decode engine with
the ``kv_transfer_params`` of the prefill's response. kvtier moves no bytes between the engines:
the prefill engine saves the prompt's chunks to the server and the decode engine's lookup finds
them. But a request finishes (and its response leaves) in the step that computed its last
chunks, and kvtier saves them one step later (_vllm_scheduler.py), so a fast proxy's decode
request may look them up first. So the prefill's response names the chunks it saves
(``kvtier_chunks``: the prompt's leading chunks that are, or are about to be, in the server), and
a decode request that carries them is held back (vLLM asks again next step) until its lookup
finds them, at most ``kvtier.timeout_ms`` (the time the prefill's STORE may take before it
fails); after that it computes what is missing.
"""

from __future__ import annotations

from typing import Any

CHUNKS = "kvtier_chunks"
MODEL = "kvtier_model"
CHUNK_SIZE = "kvtier_chunk_size"


def _params(request) -> dict:
    params = getattr(request, "kv_transfer_params", None)
    return params if isinstance(params, dict) else {}


def prefill_params(request, chunks: int, model: str, chunk_size: int) -> dict[str, Any] | None:
    """request_finished's kv_transfer_params for a prefill leg (the proxy asked for a remote
    decode) whose prompt has `chunks` leading chunks saved or being saved; None otherwise."""
    if chunks <= 0 or not _params(request).get("do_remote_decode"):
        return None
    return {"do_remote_prefill": True, "do_remote_decode": False, CHUNKS: int(chunks),
            MODEL: model, CHUNK_SIZE: int(chunk_size)}


def announced_chunks(request, model: str, chunk_size: int) -> int:
    """The leading chunks a decode request's prefill engine saved for it (0 without such
    params, or with another model's or chunk size's)."""
    p = _params(request)
    n = p.get(CHUNKS)
    if (not isinstance(n, int) or isinstance(n, bool) or p.get(MODEL) != model
            or p.get(CHUNK_SIZE) != chunk_size):
        return 0
    return max(n, 0)
