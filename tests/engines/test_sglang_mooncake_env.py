"""The SGLang launch of docs/mooncake-migration.md ("SGLang HiCache"), read by SGLang 0.5.23
itself: its command-line parser takes the flags, and its Mooncake store configuration reads the
MOONCAKE_* variables the line sets, with the values the doc gives (a misspelt variable would be
ignored by SGLang, and its default used, without an error)."""

import argparse
import re
import shlex
from pathlib import Path

from sglang.srt.environ import envs
from sglang.srt.mem_cache.storage.mooncake_store.mooncake_store import MooncakeStoreConfig
from sglang.srt.server_args import ServerArgs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mooncake-migration.md"


def docs_launch():
    """(variables, arguments) of the doc's `python -m sglang.launch_server` line, its `...` (the
    reader's own flags) left out."""
    text = DOCS.read_text()
    section = text[text.index("### SGLang HiCache"):]
    block = next(b for b in re.findall(r"```bash\n(.*?)```", section, re.S)
                 if "sglang.launch_server" in b)
    words = shlex.split(block.replace("\\\n", " "))
    variables = {}
    while re.match(r"^[A-Z_]+=", words[0]):
        name, value = words.pop(0).split("=", 1)
        variables[name] = value
    args = words[words.index("sglang.launch_server") + 1:]
    return variables, [a for a in args if a != "..."]


def test_sglang_parses_the_docs_command_line():
    _, args = docs_launch()
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    parsed = parser.parse_args(["--model-path", "unused", *args])
    assert parsed.enable_hierarchical_cache
    assert parsed.hicache_storage_backend == "mooncake"


def test_sglang_reads_the_docs_variables(monkeypatch):
    variables, _ = docs_launch()
    assert variables, "the doc's SGLang line sets no MOONCAKE_* variable"
    unknown = [name for name in variables if not hasattr(envs, name)]
    assert unknown == [], f"SGLang reads no variable named {unknown}"
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    config = MooncakeStoreConfig.load_from_env()
    assert config.master_server_address == variables["MOONCAKE_MASTER"]
    assert config.protocol == variables["MOONCAKE_PROTOCOL"]
    assert config.device_name == variables["MOONCAKE_DEVICE"]
    assert config.metadata_server == variables["MOONCAKE_TE_META_DATA_SERVER"]
    assert config.global_segment_size == int(variables["MOONCAKE_GLOBAL_SEGMENT_SIZE"])
