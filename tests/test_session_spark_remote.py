"""SPARK_REMOTE that is malformed, or names a port nobody answers on, is a setting to fix (exit 2) said at once: it
was an internal error (exit 1) for a malformed URL, and minutes of client retries, then exit 1 and a process that
did not end, for an unreachable server. No JVM, no server: the check runs before any session is built."""
from __future__ import annotations

import json
import socket
import time

import pytest

from helpers.reference import build_random, write_parquet
from scavenger.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url, said", [
    ("garbage", "is not a Spark Connect URL"),
    ("http://localhost:15002", "is not a Spark Connect URL"),
    ("sc://[::1", "is not a Spark Connect URL"),
    ("sc://localhost:99999", "is not a Spark Connect URL"),
    (None, "no Spark Connect server answers at 127.0.0.1"),
])
def test_spark_remote_that_cannot_be_reached_is_a_setting(tmp_path, monkeypatch, url, said):
    write_parquet(build_random(seed=1, K=2, n_ads=3, days=(0,), per_day=20), str(tmp_path / "d"))
    monkeypatch.setenv("SPARK_REMOTE", url or f"sc://127.0.0.1:{_closed_port()}")
    start = time.perf_counter()
    assert main(["adc", "--logs", str(tmp_path / "d" / "logs"), "--out", str(tmp_path / "out")]) == 2
    assert time.perf_counter() - start < 30
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["status"] == "bad_arguments" and "SPARK_REMOTE" in res["message"] and said in res["message"]
