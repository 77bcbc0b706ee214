"""vLLM's KV cache events for the chunks kvtier stores: ``BlockStored`` once a save put a chunk in
the server, ``AllBlocksCleared`` after ``reset_cache`` dropped the model's chunks.

They go the way vLLM carries a connector's events: the scheduler half builds each chunk's
``BlockStored`` when it plans the save (it has the Request: vLLM's block hashes, tokens, LoRA and
extra keys), the plan takes them to the workers, a worker keeps those of the chunks its STORE left
in the server (``get_kv_connector_kv_cache_events``), vLLM's KVOutputAggregator merges the
workers' containers, and the scheduler half publishes an event once every worker that saved in
that step reported it (a chunk is a hit only when every rank has its slice), through
``take_events`` and vLLM's event publisher (``--kv-events-config``).

An event names a chunk the way vLLM names its own blocks: the hashes of the chunk's vLLM blocks
(``block_size`` is vLLM's block size), the hash of the block before it as the parent, the chunk's
tokens, medium ``KVTIER``. Nothing is built unless vLLM's ``enable_kv_cache_events`` is on.
The server evicts chunks on its own, and the connector does not learn which: there is no
``BlockRemoved``, so a consumer must take kvtier's events as hints that may have gone stale.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

log = logging.getLogger("kvtier.integrations.vllm")

MEDIUM = "KVTIER"

try:
    from vllm.distributed.kv_events import (  # type: ignore
        AllBlocksCleared,
        BlockStored,
        KVConnectorKVEvents,
    )
    from vllm.v1.core.kv_cache_utils import (  # type: ignore
        generate_block_hash_extra_keys,
        maybe_convert_block_hash,
        to_event_extra_keys,
    )

    HAVE_EVENTS = True
except Exception:  # noqa: BLE001  (no vLLM, or one without connector events: none are made)
    HAVE_EVENTS = False
    KVConnectorKVEvents = object  # type: ignore[misc,assignment]


def events_enabled(vllm_config) -> bool:
    """vLLM's --kv-events-config has enable_kv_cache_events on."""
    cfg = getattr(vllm_config, "kv_events_config", None)
    return HAVE_EVENTS and bool(getattr(cfg, "enable_kv_cache_events", False))


def chunk_events(request, first_chunk: int, end_chunk: int, chunk: int,
                 block_size: int) -> list:
    """One BlockStored per chunk [first_chunk, end_chunk) of `request`'s prompt; [] if vLLM did
    not hash that far (the events are left out, the save is not)."""
    hashes = list(getattr(request, "block_hashes", None) or ())
    bpc = chunk // block_size
    if request is None or len(hashes) < end_chunk * bpc:
        return []
    tokens = request.all_token_ids
    lora = getattr(request, "lora_request", None)
    out = []
    try:
        for c in range(first_chunk, end_chunk):
            b0, b1 = c * bpc, (c + 1) * bpc
            extra = [generate_block_hash_extra_keys(request, b * block_size,
                                                    (b + 1) * block_size, 0)[0]
                     for b in range(b0, b1)]
            out.append(BlockStored(
                block_hashes=[maybe_convert_block_hash(h) for h in hashes[b0:b1]],
                parent_block_hash=maybe_convert_block_hash(hashes[b0 - 1]) if b0 else None,
                token_ids=[int(t) for t in tokens[c * chunk:(c + 1) * chunk]],
                block_size=block_size,
                lora_id=lora.adapter_id if lora is not None else None,
                medium=MEDIUM,
                lora_name=lora.name if lora is not None else None,
                extra_keys=to_event_extra_keys(extra) if any(extra) else None,
                group_idx=0,
                session_id=getattr(request, "session_id", None)))
    except Exception:  # noqa: BLE001  (events are a side channel: never fail a save for them)
        log.exception("kvtier connector: building the KV events of %s failed",
                      getattr(request, "request_id", "?"))
        return []
    return out


class KvtierKVEvents(KVConnectorKVEvents):
    """vLLM's container of a connector's events: one worker's events of a step, or (merged by
    vLLM's KVOutputAggregator) those of several workers, each counted once per worker."""

    def __init__(self, events=(), num_workers: int = 1) -> None:
        self._counts: collections.Counter = collections.Counter(events)
        self._workers = num_workers

    def add_events(self, events: list) -> None:
        self._counts.update(events)

    def aggregate(self) -> "KvtierKVEvents":
        """Keeps the events every contributing worker reported, once each."""
        common = [e for e, n in self._counts.items() if n >= self._workers]
        self._counts = collections.Counter(common)
        self._workers = 1
        return self

    def increment_workers(self, count: int = 1) -> None:
        self._workers += count

    def get_all_events(self) -> list:
        return list(self._counts.elements())

    def get_number_of_workers(self) -> int:
        return self._workers

    def clear_events(self) -> None:
        self._counts.clear()
        self._workers = 1

    def __repr__(self) -> str:
        return f"<KvtierKVEvents workers={self._workers} events={len(self._counts)}>"


class WorkerEvents:
    """A worker's events since vLLM last asked: those of the chunks its saves left in the
    server. A worker that saved reports a container even without events, so that a failed
    save keeps the other workers' events of those chunks from being published."""

    def __init__(self) -> None:
        self._events: dict[Any, None] = {}  # ordered, each event once
        self._saved = False

    def saved(self, events) -> None:
        self._saved = True
        self._events.update(dict.fromkeys(events))

    def take(self) -> KvtierKVEvents | None:
        if not self._saved:
            return None
        out = KvtierKVEvents(list(self._events))
        self._events, self._saved = {}, False
        return out


class SchedulerEvents:
    """The scheduler half's events, in order, until vLLM's scheduler takes them."""

    def __init__(self) -> None:
        self._pending: list = []

    def collect(self, connector_output) -> None:
        got = getattr(connector_output, "kv_cache_events", None)
        if isinstance(got, KvtierKVEvents):
            self._pending.extend(got.aggregate().get_all_events())

    def cleared(self) -> None:
        self._pending.append(AllBlocksCleared())

    def take(self) -> list:
        out, self._pending = self._pending, []
        return out
