"""kvtier's plugs for inference engines (docs/integrations.md).

- ``kvtier.integrations.vllm.KvtierConnector``: a vLLM KV connector (v1) over ``kvtier server``.
- ``kvtier.integrations.sglang.KvtierHiCacheStorage``: an SGLang HiCache storage backend over the
  kvtier store.

Each module imports its engine only when the engine is installed, so both work (and are tested)
without it.
"""
