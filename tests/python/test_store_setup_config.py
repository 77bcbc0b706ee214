"""setup() and setup_dummy() hand their arguments, as one dict, to the store's one setup parser
(src/store/node/store_client_factory.h, the cache server's `store` connector's too): the keyword
and dict forms reach the same config, and each key on which the old Python and C++ parsers
disagreed has the rule written there. No cluster: the parser alone, and setups it refuses."""

import logging

import pytest

from kvtier._kvtier import parse_store_setup
from kvtier.store import DistributedStore, ErrorCode, parse_byte_size
from store_cluster import free_port

INVALID = int(ErrorCode.INVALID_PARAMS)


def setup_parse(config):
    return parse_store_setup(config, require_local_hostname=True)


def parsed(config):
    code, notes, result = setup_parse(config)
    assert code == 0, notes
    return result, notes


def refusal(config, **rules):
    code, message, result = parse_store_setup(config, **rules)
    assert code == INVALID and result is None, (config, message)
    return message


def keyword_config(*args, **kwargs):
    """The dict setup(*args, **kwargs) hands to the parser (its native call replaced)."""
    store = DistributedStore()
    seen = []
    store._setup_from_config = lambda config, *rules: seen.append(config) or (0, "", [])
    assert store.setup(*args, **kwargs) == 0
    return seen[0]


def test_keyword_and_dict_forms_reach_the_same_config():
    args = ("  localhost:17000", "P2PHANDSHAKE", "64MB", 8 << 20, "rdma", "mlx5_0",
            "etcd://10.0.0.1:2379;10.0.0.2:2379/prod")
    keyword, keyword_notes = parsed(keyword_config(*args, tenant_id="", client_http_port=1))
    as_dict, dict_notes = parsed({
        "local_hostname": "localhost:17000", "metadata_server": "P2PHANDSHAKE",
        "global_segment_size": "64MB", "local_buffer_size": 8 << 20, "protocol": "rdma",
        "rdma_devices": "mlx5_0", "master_server_address": "etcd://10.0.0.1:2379;10.0.0.2:2379/prod",
        "tenant_id": ""})
    assert keyword == as_dict
    assert keyword == {"dummy": False, "master": "etcd://10.0.0.1:2379;10.0.0.2:2379/prod",
                       "host": "127.0.0.1", "port": 17000, "global_segment_size": 64 << 20,
                       "local_buffer_size": 8 << 20, "rpc_timeout_ms": 5000, "auth_token": ""}
    assert keyword_notes == dict_notes and len(keyword_notes) == 1
    assert "'protocol' \"rdma\" runs over TCP" in keyword_notes[0]
    # Defaults: the keyword form's and an almost empty dict's agree.
    assert parsed(keyword_config("127.0.0.1")) == parsed({"local_hostname": "127.0.0.1"})


def test_ipc_socket_path_is_ignored_with_a_note():
    _, notes = parsed({"local_hostname": "h", "ipc_socket_path": "/tmp/x.sock"})
    assert len(notes) == 1 and "ignoring 'ipc_socket_path'" in notes[0]
    assert "unknown" not in notes[0]


def test_metadata_server_and_rdma_devices_are_ignored_silently():
    _, notes = parsed({"local_hostname": "h", "metadata_server": "etcd://x:1",
                       "rdma_devices": "mlx5_0,mlx5_1", "device_name": "d", "engine": object()})
    assert notes == []


def test_tenant_id_is_default_only():
    for ok in ("default", "", None):
        assert parsed({"local_hostname": "h", "tenant_id": ok})[1] == []
    assert "'tenant_id'" in refusal({"local_hostname": "h", "tenant_id": "team-b"})
    # The connector's and setup_dummy's configs too.
    assert "'tenant_id'" in refusal({"server_address": "127.0.0.1:1", "tenant_id": "team-b"})


def test_ssd_offload_refused_and_http_server_noted():
    assert "'enable_ssd_offload'" in refusal({"local_hostname": "h", "enable_ssd_offload": True})
    _, notes = parsed({"local_hostname": "h", "enable_client_http_server": True,
                       "client_http_port": 9300, "ssd_offload_path": "/ssd"})
    assert len(notes) == 1 and "'enable_client_http_server' is ignored" in notes[0]


def test_master_server_address_is_an_alias_checked_by_its_own_name():
    assert parsed({"local_hostname": "h", "master_server_address": "10.0.0.1:6000"})[0][
        "master"] == "10.0.0.1:6000"
    assert "'master_server_address'" in refusal({"local_hostname": "h",
                                                 "master_server_address": "redis://h:1"})
    assert "'master_server_addr'" in refusal({"local_hostname": "h",
                                              "master_server_addr": "etcd://no-port"})


def test_local_hostname_localhost_spaces_and_requirement():
    result, _ = parsed({"local_hostname": " localhost "})
    assert (result["host"], result["port"]) == ("127.0.0.1", 0)
    assert "'local_hostname' is required" in refusal({"metadata_server": "x"},
                                                     require_local_hostname=True)
    # The connector (no rule) defaults it.
    assert parse_store_setup({})[2]["host"] == "127.0.0.1"


def test_server_address_in_a_setup_dict_makes_a_dummy():
    result, notes = parsed({"server_address": "127.0.0.1:50052", "local_hostname": "h",
                            "mem_pool_size": "1GB"})
    assert result["dummy"] and result["mem_pool_size"] == 1 << 30
    assert len(notes) == 1 and "ignoring 'local_hostname'" in notes[0]
    assert "'server_address' is required" in refusal(
        {"mem_pool_size": 0, "server_address": None}, require_server_address=True)


def test_none_is_the_default_and_protocol_must_be_a_string():
    result, notes = parsed({"local_hostname": "h", "protocol": None, "auth_token_file": None,
                            "global_segment_size": None})
    assert notes == [] and result["global_segment_size"] == 16 << 20
    assert "'protocol'" in refusal({"local_hostname": "h", "protocol": 1})


def test_bad_values_are_refused_naming_the_key():
    for key, value in (("global_segment_size", -1), ("global_segment_size", True),
                       ("local_buffer_size", 1 << 70), ("local_buffer_size", 1.5),
                       ("local_hostname", 17000), ("rpc_timeout_ms", 0)):
        config = {"local_hostname": "h", key: value}
        assert f"'{key}'" in refusal(config), config


def test_refused_setups_log_why_and_leave_the_store_unset(caplog):
    s = DistributedStore()
    with caplog.at_level(logging.ERROR, logger="kvtier.store"):
        assert s.setup("127.0.0.1", tenant_id="team-b") == INVALID
        assert s.setup({"local_hostname": "h", "bogus": 1, "enable_ssd_offload": True}) == INVALID
        assert s.setup_dummy(0, 0, None) == INVALID
        assert s.setup_dummy("1GB?", 0, f"127.0.0.1:{free_port()}") == INVALID
    logged = caplog.text
    for word in ("'tenant_id'", "'enable_ssd_offload'", "'server_address' is required",
                 "'mem_pool_size'"):
        assert word in logged
    assert not s.is_set_up


def test_notes_are_logged_as_warnings(caplog):
    # Parsed (one note), then refused by the connect: no node listens on that port's socket.
    s = DistributedStore()
    with caplog.at_level(logging.WARNING, logger="kvtier.store"):
        assert s.setup({"server_address": f"127.0.0.1:{free_port()}", "bogus": 1}) < 0
    assert "setup: ignoring unknown key 'bogus'" in caplog.text
    assert not s.is_set_up


def test_parse_byte_size_is_the_native_parser():
    assert parse_byte_size("1.5G") == 3 << 29 and parse_byte_size(b"4KB") == 4096
    with pytest.raises(ValueError):
        parse_byte_size("lots")
