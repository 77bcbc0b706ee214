"""The start-up warning about vLLM's kv_load_failure_policy, on connectors that vLLM's own
Scheduler builds from the docs' --kv-transfer-config (vllm_rig.Engine).

vLLM's default policy is "fail": every load kvtier cannot complete after a hit ends the user's
request with an error. The connector says so once at start-up, with the fix, whenever it loads
(test_vllm_loads.py shows both policies at work)."""

import logging

import pytest
from vllm_rig import Engine, config_for

LOG = "kvtier.integrations.vllm"


def policy_warnings(caplog):
    return [r for r in caplog.records
            if r.name == LOG and r.levelno == logging.WARNING
            and "kv_load_failure_policy" in r.getMessage()]


def start(server, model_dir, caplog, policy, role="kv_both"):
    """An engine whose kv_transfer_config has `policy` (None: the key left out, vLLM's default)
    and `role`; the policy warnings its start-up logged."""
    cfg = config_for(server)
    cfg["kv_role"] = role
    if policy is None:
        cfg.pop("kv_load_failure_policy", None)
    else:
        cfg["kv_load_failure_policy"] = policy
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOG):
        engine = Engine(model_dir, cfg)
    try:
        want = policy or "fail"
        assert engine.vllm_config.kv_transfer_config.kv_load_failure_policy == want
        assert engine.connector._scheduler._s.load_failure_policy == want
    finally:
        engine.shutdown()
    return policy_warnings(caplog)


@pytest.mark.parametrize("policy", [None, "fail"])
def test_policy_fail_warns_once_and_names_the_fix(server, model_dir, caplog, policy):
    found = start(server, model_dir, caplog, policy)
    assert len(found) == 1
    text = found[0].getMessage()
    assert "'fail'" in text and "ends that request with an error" in text
    # What an operator does about it: the exact JSON to add, and where.
    assert '"kv_load_failure_policy":"recompute"' in text and "--kv-transfer-config" in text


def test_policy_recompute_does_not_warn(server, model_dir, caplog):
    assert start(server, model_dir, caplog, "recompute") == []


def test_a_producer_that_never_loads_does_not_warn(server, model_dir, caplog):
    # kv_producer (a prefill-only engine) stores and never loads: its policy never applies.
    assert start(server, model_dir, caplog, "fail", role="kv_producer") == []
