"""The SGLang launch lines of docs/integrations.md, read by SGLang 0.5.23 itself: its command-line
parser takes them, its extra-config parser reads the JSON, and its StorageBackendFactory loads
kvtier's backend from that JSON. docs_extra_config() is also what test_sglang_hicache.py attaches,
so the configuration the docs give is the one every SGLang test runs."""

import argparse
import re
import shlex
from pathlib import Path

import pytest
import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig
from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import HybridCacheController
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
from sglang.srt.mem_cache.storage import StorageBackendFactory
from sglang.srt.server_args import ServerArgs

from kvtier.integrations.sglang import KvtierHiCacheStorage
from store_cluster import running_cluster

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
# The addresses and sizes the docs' examples use, and what the tests put in their place.
DOCS_NODE, DOCS_MASTER = "127.0.0.1:50052", "<master>:50051"


def sglang_section():
    text = DOCS.read_text()
    start = text.index("## SGLang HiCache")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def launch_lines():
    """The arguments of each `python -m sglang.launch_server` command of the SGLang section (a
    code block holding that one command, its JSON spanning lines inside its quotes)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", sglang_section(), re.S):
        if "sglang.launch_server" in block:
            argv = shlex.split(block.replace("\\\n", " "))  # joins continuation lines
            commands.append(argv[argv.index("sglang.launch_server") + 1:])
    return commands


def parsed_launch_lines():
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return [parser.parse_args(argv) for argv in launch_lines()]


def docs_extra_config(cluster, mode):
    """The extra_config of the docs' launch line for `mode` ("dummy": node_address, "embedded":
    master_server_address), as SGLang parses it, pointed at `cluster`."""
    for args in parsed_launch_lines():
        text = args.hicache_storage_backend_extra_config
        extra = HybridCacheController.parse_storage_backend_extra_config(text)[0]
        if mode == "dummy" and "node_address" in extra:
            assert extra["node_address"] == DOCS_NODE
            extra["node_address"] = cluster.node_address
            return extra
        if mode == "embedded" and "master_server_address" in extra:
            assert extra["master_server_address"] == DOCS_MASTER
            extra["master_server_address"] = cluster.master_address
            extra["global_segment_size"] = "16MB"  # the docs' size is per production rank
            return extra
    raise AssertionError(f"docs/integrations.md has no SGLang launch line for {mode} mode")


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(500) as c:
        yield c


def host_pool():
    device = MHATokenToKVPool(32, 4, torch.bfloat16, head_num=2, head_dim=8, layer_num=2,
                              device="cpu", enable_memory_saver=False)
    return MHATokenToKVPoolHost(device._mha_buffer_info(), 2.0, 0, 4, "page_first",
                                pin_memory=False, device="cpu", device_capacity_tokens=32,
                                start_layer=0, end_layer=2)


def storage_config(extra, **fields):
    base = dict(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                model_name="tiny")
    base.update(fields)
    return HiCacheStorageConfig(extra_config=extra, **base)


def test_docs_launch_lines_are_sglang_command_lines():
    parsed = parsed_launch_lines()
    assert len(parsed) == 2, "one launch line per mode (dummy, embedded)"
    for args in parsed:
        assert args.enable_hierarchical_cache
        assert args.hicache_storage_backend == "dynamic"
        assert args.hicache_mem_layout == "page_first"
        extra = HybridCacheController.parse_storage_backend_extra_config(
            args.hicache_storage_backend_extra_config)[0]
        assert (extra["backend_name"], extra["module_path"], extra["class_name"]) == (
            "kvtier", "kvtier.integrations.sglang", "KvtierHiCacheStorage")
        assert extra["interface_v1"] == 1


@pytest.mark.parametrize("mode", ["dummy", "embedded"])
def test_sglang_factory_loads_the_backend_from_the_docs_config(cluster, mode):
    pool = host_pool()
    backend = StorageBackendFactory.create_backend(
        "dynamic", storage_config(docs_extra_config(cluster, mode)), pool)
    try:
        assert type(backend) is KvtierHiCacheStorage and isinstance(backend, HiCacheStorage)
        backend.register_mem_pool_host(pool)
        assert backend.batch_exists(["00" * 32]) == 0
    finally:
        backend.close()


def test_sglang_factory_reports_a_config_without_a_store(cluster):
    extra = docs_extra_config(cluster, "dummy")
    del extra["node_address"]
    with pytest.raises(ValueError, match="node_address"):
        StorageBackendFactory.create_backend("dynamic", storage_config(extra), host_pool())
    extra["node_address"] = "127.0.0.1:1"
    with pytest.raises(RuntimeError, match="cannot reach the store"):
        StorageBackendFactory.create_backend("dynamic", storage_config(extra), host_pool())


def test_heterogeneous_tp_head_splitting_is_refused(cluster):
    config = storage_config(docs_extra_config(cluster, "dummy"), tp_lcm_size=4,
                            should_split_heads=True)
    with pytest.raises(ValueError, match="tp_lcm_size"):
        StorageBackendFactory.create_backend("dynamic", config, host_pool())
