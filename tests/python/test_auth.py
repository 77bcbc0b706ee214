"""kvtier.CacheClient(auth_token_file=...) against a server started with --auth-token-file."""

import os
import time

import pytest

import kvtier
from kvtier.server import LocalServer


def _token_file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, 0o600)
    return str(path)


def test_only_the_right_token_file_connects(tmp_path):
    good = _token_file(tmp_path, "token", "python-secret\n")
    wrong = _token_file(tmp_path, "wrong", "not-the-secret\n")
    with LocalServer(l1_size_gb=0.0625, chunk_size=32, auth_token_file=good) as srv:
        c = srv.client(timeout_ms=5000)  # presents the server's file
        c.ping()
        assert c.server_info()["chunk_size"] == 32

        for token_file, says in ((wrong, "refused authentication"),
                                 (None, "requires authentication")):
            t0 = time.monotonic()
            with pytest.raises(kvtier.KvtierError) as err:
                kvtier.CacheClient(port=srv.port, timeout_ms=60000,
                                   auth_token_file=token_file)
            assert err.value.code_name == "PERMISSION_DENIED", str(err.value)
            assert says in err.value.message
            assert time.monotonic() - t0 < 30  # told at the handshake, not at the timeout

        c.ping()  # the server kept serving the client with the secret
        c.close()


def test_an_unreadable_token_file_is_a_clear_error(tmp_path):
    with pytest.raises(kvtier.KvtierError) as err:
        kvtier.CacheClient(port=1, timeout_ms=100, auth_token_file=str(tmp_path / "missing"))
    assert err.value.code_name == "INVALID_ARGUMENT"
    assert "cannot read it" in err.value.message


def test_an_embedded_store_client_proves_the_masters_secret(tmp_path):
    from launchers import start_master
    from kvtier.store import DistributedStore, ErrorCode

    good = _token_file(tmp_path, "store-token", "store-secret\n")
    wrong = _token_file(tmp_path, "store-wrong", "not-the-store-secret\n")
    master = start_master(["--log-level", "error", "--auth-token-file", good])
    port = master.port
    try:
        for token_file, expected in ((good, 0), (wrong, ErrorCode.ILLEGAL_CLIENT),
                                     (None, ErrorCode.ILLEGAL_CLIENT)):
            store = DistributedStore()
            code = store.setup("127.0.0.1", global_segment_size="1MB",
                               master_server_addr=f"127.0.0.1:{port}",
                               auth_token_file=token_file)
            assert code == expected, (token_file, code)
            if code == 0:
                assert store.put("auth-key", b"value") == 0
                assert store.get("auth-key") == b"value"
            store.close()
    finally:
        master.stop()
        master.remove_log()
