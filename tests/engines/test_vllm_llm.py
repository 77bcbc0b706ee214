"""The whole engine: ``vllm.LLM`` with a tiny llama made here (random weights,
``load_format="dummy"``) and the docs' --kv-transfer-config, generating the same prompt twice:
the second run loads the first one's chunks from a real `kvtier server` and generates the same
tokens.

It needs a GPU. The PyPI wheel is a CUDA build without vLLM's CPU kernels: on a machine without a
GPU, vLLM's CPU platform starts and its worker stops at
``torch.ops._C.init_cpu_memory_env`` ("'_OpNamespace' '_C' object has no attribute
'init_cpu_memory_env'"; "No module named 'vllm._C'" before it). The scheduler and worker
connector calls run here anyway (test_vllm_scheduler.py and the others).
"""

import pytest
from vllm_rig import HAS_GPU, config_for, make_model_dir

from kvtier.server import LocalServer


@pytest.mark.skipif(not HAS_GPU, reason="vllm.LLM needs a GPU: this machine has none, and the "
                    "PyPI wheel has no CPU kernels (torch.ops._C.init_cpu_memory_env is missing)")
def test_llm_generates_twice_and_the_second_run_loads_from_kvtier(monkeypatch):
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the connector stats are here
    with LocalServer(l1_size_gb=0.25, chunk_size=32) as srv:
        llm = LLM(model=make_model_dir(), load_format="dummy", skip_tokenizer_init=True,
                  dtype="bfloat16", enforce_eager=True, max_model_len=512, block_size=16,
                  gpu_memory_utilization=0.2, enable_prefix_caching=False,
                  kv_transfer_config=KVTransferConfig(**config_for(srv)))
        prompts = [{"prompt_token_ids": list(range(1, 200))}]
        params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
        first = llm.generate(prompts, params)[0].outputs[0].token_ids
        second = llm.generate(prompts, params)[0].outputs[0].token_ids
        assert second == first
        stats = srv.client().stats()
        assert stats["lookup_hit_chunks_l1"] >= 6  # the second run found 6 chunks of 32
