"""vLLM's connector base classes (the real ones when vLLM is installed, stand-ins otherwise) and the
metadata the kvtier connector's scheduler half sends to its workers each step.

The stand-ins have vLLM's names, roles and default methods, so ``kvtier.integrations.vllm`` imports
and works (and is tested) on machines without vLLM. vLLM itself is imported only if it is
installed; whatever goes wrong while importing it, the stand-ins are used and the reason is kept
in ``VLLM_IMPORT_ERROR``.
"""

from __future__ import annotations

import enum
import importlib.util
from abc import ABC
from dataclasses import dataclass, field

VLLM_AVAILABLE = False
VLLM_IMPORT_ERROR: str | None = None

try:
    if importlib.util.find_spec("vllm") is None:
        raise ImportError("vllm is not installed")
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )

    VLLM_AVAILABLE = True
except Exception as e:  # noqa: BLE001  (any failure inside vLLM's import means: no vLLM)
    VLLM_IMPORT_ERROR = f"{type(e).__name__}: {e}"

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        """Which process a connector instance lives in (same values as vLLM's)."""

        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata(ABC):  # type: ignore[no-redef]  # noqa: B024
        """Marker base class of what the scheduler half sends to the workers."""

    class KVConnectorBase_V1(ABC):  # type: ignore[no-redef]  # noqa: N801
        """The parts of vLLM's KVConnectorBase_V1 that a connector relies on."""

        def __init__(self, vllm_config, role, kv_cache_config=None):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            if vllm_config.kv_transfer_config is None:
                raise ValueError("kv_transfer_config must be set for a KV connector")
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role

        @property
        def role(self):
            return self._role

        def bind_connector_metadata(self, connector_metadata):
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self):
            self._connector_metadata = None

        def _get_connector_metadata(self):
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self):
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches):
            return None

        def set_host_xfer_buffer_ops(self, copy_operation):
            return None

        def handle_preemptions(self, *args, **kwargs):
            return None

        def get_finished(self, finished_req_ids):
            return None, None

        def get_block_ids_with_load_errors(self):
            return set()

        def get_kv_connector_stats(self):
            return None

        def shutdown(self):
            return None

        def update_connector_output(self, connector_output):
            return None

        def request_finished(self, request, block_ids):
            return False, None

        def take_events(self):
            return ()

        def get_finished_count(self):
            return None

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config):
            return None

        @classmethod
        def requires_piecewise_for_cudagraph(cls, extra_config):
            return False


try:  # vLLM's marker of connectors that work with its hybrid KV cache manager (HMA)
    if not VLLM_AVAILABLE:
        raise ImportError("no vLLM")
    from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA  # type: ignore
except ImportError:  # no vLLM, or a release from before HMA connectors

    class SupportsHMA(ABC):  # type: ignore[no-redef]  # noqa: B024
        """Stand-in for vLLM's SupportsHMA: the connector has request_finished_all_groups."""


def role_name(role) -> str:
    """'SCHEDULER' or 'WORKER' for vLLM's enum, ours, or their names/values."""
    name = getattr(role, "name", None)
    if name is None:
        name = {0: "SCHEDULER", 1: "WORKER"}.get(role, str(role)).upper()
    return name


@dataclass
class RetrievePlan:
    """Copy the cached chunks [first_chunk, end_chunk) of a prompt into a request's blocks.

    Only tokens [start_token, end_token) are written to the engine: those before start_token are
    the engine's own prefix-cache hit, those after end_token are recomputed. ``block_ids`` are the
    engine's blocks for exactly [start_token, end_token) (both block-aligned). ``tail_block_ids``
    are the request's blocks for the rest of the last chunk, [end_token, end_chunk * chunk), as
    far as vLLM allocated them: the GPU path retrieves whole chunks straight into the engine's
    blocks, and those tokens are about to be recomputed there anyway.
    """

    req_id: str
    hashes: list[bytes]  # chain hashes of chunks [0, end_chunk)
    salt: str
    first_chunk: int
    end_chunk: int
    start_token: int
    end_token: int
    block_ids: list[int]
    tail_block_ids: list[int] = field(default_factory=list)


@dataclass
class StorePlan:
    """Store the full chunks [first_chunk, end_chunk); ``block_ids`` are the engine's blocks for
    exactly those chunks' tokens. The chunks were computed in the previous step (see
    _vllm_scheduler.py for why saves run one step late)."""

    req_id: str
    hashes: list[bytes]  # chain hashes of chunks [0, end_chunk)
    salt: str
    first_chunk: int
    end_chunk: int
    block_ids: list[int]
    # vLLM's BlockStored event of each chunk, when vLLM publishes KV events (_vllm_events.py).
    events: list = field(default_factory=list)


@dataclass
class KvtierConnectorMetadata(KVConnectorMetadata):
    """One scheduler step's transfers, sent to every worker (plain data: it is pickled)."""

    loads: list[RetrievePlan] = field(default_factory=list)
    saves: list[StorePlan] = field(default_factory=list)
    # Finished requests whose blocks vLLM kept for these saves: every worker reports them in
    # get_finished()'s finished_sending once the saves are done.
    release: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.loads and not self.saves and not self.release
