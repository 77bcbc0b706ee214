"""The `vllm serve` line of docs/integrations.md, read by vLLM 0.34 itself: the `vllm serve`
command's own parser and checks take it (the doc's `<model>` a tiny local model), vLLM builds
its engine configuration from it, and its KV connector factory finds kvtier's connector from the
configuration. (Every vLLM engine test runs with the same --kv-transfer-config: vllm_rig.py.)"""

import re
import shlex

import vllm_rig  # noqa: F401  (first: it selects vLLM's CPU platform on a machine without a GPU)
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser


def docs_serve_args():
    """The arguments after `vllm serve` in the vLLM section's code block."""
    text = vllm_rig.DOCS.read_text()
    section = text[text.index("## vLLM"):text.index("## SGLang")]
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "vllm serve" in b]
    assert len(blocks) == 1, f"expected one `vllm serve` block in the vLLM section: {blocks}"
    words = shlex.split(blocks[0].replace("\\\n", " "))
    return words[words.index("serve") + 1:]


def test_vllm_serve_takes_the_docs_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = vllm_rig.make_model_dir()
    args = [model if w == "<model>" else w for w in docs_serve_args()]
    parser = FlexibleArgumentParser()
    serve = ServeSubcommand()
    serve.subparser_init(parser.add_subparsers())
    parsed = parser.parse_args(["serve", *args])
    serve.validate(parsed)
    parsed.model = parsed.model_tag  # as `vllm serve` does before it builds the engine
    config = AsyncEngineArgs.from_cli_args(parsed).create_engine_config()
    kv = config.kv_transfer_config
    for key, value in vllm_rig.docs_kv_transfer_config().items():
        assert getattr(kv, key) == value, (key, getattr(kv, key), value)
    assert config.cache_config.block_size == int(args[args.index("--block-size") + 1])
    assert KVConnectorFactory.get_connector_class(kv).__name__ == "KvtierConnector"
