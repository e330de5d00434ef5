"""`scavenger train` on either engine (issue 27): the same models and decisions from DuckDB and Spark, the CLI on
DuckDB without Java, and the notebook entry ``scavenger.train`` (the data set: train_world.py, 3 days of 5k events)."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from helpers.train_world import M, SCORE, TRAIN, config, decisions_frame, make_world, pid, run_duckdb


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    return make_world(str(tmp_path_factory.mktemp("train_engines")), days=3, events_per_day=5_000)


@pytest.fixture(scope="module")
def on_duckdb(world) -> dict:
    out = os.path.join(world["root"], "out")
    return {"summary": run_duckdb(config(world, out, estimate=False)), "out": out}


def test_engines_give_the_same_policies(spark, world, on_duckdb):
    """The same run on Spark: the same models (coefficients equal to 1e-9; the exact decimal sums make them equal
    to the bit), the same decisions, notes, counts and true values."""
    from scavenger.engines.spark import SparkEngine
    from scavenger.policies.learning import read_model
    from scavenger.policies.train import run_training

    out = os.path.join(world["root"], "out_spark")
    summary = run_training(SparkEngine(spark, "test"), config(world, out, estimate=False))
    assert summary["engine"]["name"] == "spark"
    for method in ("regression", "cost_sensitive"):
        meta_d, arr_d = read_model(os.path.join(on_duckdb["out"], "model", method))
        meta_s, arr_s = read_model(os.path.join(out, "model", method))
        assert meta_d["vocabulary"] == meta_s["vocabulary"] and sorted(arr_d) == sorted(arr_s)
        for name in arr_d:
            assert np.allclose(arr_d[name], arr_s[name], rtol=1e-9, atol=1e-12), (method, name)
    assert decisions_frame(os.path.join(out, "decisions")).equals(
        decisions_frame(os.path.join(on_duckdb["out"], "decisions")))
    notes = [pd.read_parquet(os.path.join(o, "decision_notes")).drop(columns="dt")
             .sort_values(["policy_id", "event_id"]).reset_index(drop=True) for o in (out, on_duckdb["out"])]
    assert notes[0].astype(str).equals(notes[1].astype(str))
    mine = on_duckdb["summary"]
    assert summary["counts"] == mine["counts"]
    for p, pol in summary["policies"].items():
        for key in ("events_decided", "events_with_fewer_than_m_eligible", "fallback_scored_ads_chosen",
                    "duplicates_replaced"):
            assert pol[key] == mine["policies"][p][key], (p, key)
        assert math.isclose(pol["truth"]["true_value"], mine["policies"][p]["truth"]["true_value"], rel_tol=1e-9)


def test_notebook_api_train(world, tmp_path):
    """``scavenger.train`` is the job's code with the engine keyword; on local Parquet it runs on DuckDB."""
    import scavenger

    res = scavenger.train(os.path.join(world["gen"], "logs"), date_from=TRAIN[0], date_to=TRAIN[1],
                          score_from=SCORE[0], score_to=SCORE[1], out=str(tmp_path / "api"), method="regression",
                          truth="none", estimate=False, engine="auto")
    assert res.engine["name"] == "duckdb" and list(res.pandas["policy_id"]) == [pid("regression")]
    dec = pd.read_parquet(res.decisions)
    assert len(dec) == world["events_per_day"] and dec["slots"].map(len).eq(M).all()   # no eligibility table: the 20 trained ads


@pytest.mark.e2e
def test_cli_train_runs_without_java(world, on_duckdb, tmp_path):
    """`scavenger train` on local Parquet: DuckDB, and no JVM is started (a tripwire ``java`` first on PATH records
    any call); the same decisions as the in-process run."""
    import stat
    import subprocess
    import sys
    from pathlib import Path

    trap_dir, record = tmp_path / "bin", tmp_path / "java-called"
    trap_dir.mkdir()
    trap = trap_dir / "java"
    trap.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 1\n")
    trap.chmod(trap.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME", "SPARK_REMOTE",
                                                               "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS")}
    env["PATH"] = os.pathsep.join([str(trap_dir), env.get("PATH", "")])
    out = tmp_path / "out"
    proc = subprocess.run([str(Path(sys.executable).with_name("scavenger")), "train", "--logs",
                           os.path.join(world["gen"], "logs"), "--from", TRAIN[0], "--to", TRAIN[1], "--score-from",
                           SCORE[0], "--score-to", SCORE[1], "--eligibility", world["elig"], "--seed", "3",
                           "--dedup", "both", "--gate", "report", "--out", str(out)],   # report: config()'s
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not record.exists(), f"a JVM start was attempted: java {record.read_text()}"
    result = json.loads((out / "result.json").read_text())
    assert result["engine"]["name"] == "duckdb" and result["status"] == "ok"
    assert decisions_frame(out / "decisions").equals(decisions_frame(os.path.join(on_duckdb["out"], "decisions")))
    assert "factored" in proc.stdout and len(result["summary"]["estimates"]) == 3
    assert "note: factored: check(s) b failed (enough exploration); estimates marked (--gate report)" in proc.stdout


def test_context_keys_the_same_on_spark(spark, tmp_path):
    """The escaped context key (statements.ctx_key_sql) on Spark: the Python reference ctx_key of every hostile
    context (train_world.HOSTILE_CONTEXTS, 16 keys, the DuckDB test in test_policies_train_edges.py), and the same
    entries as tokens."""
    import datetime as dt

    from helpers.train_world import HOSTILE_CONTEXTS, hostile_logs

    from scavenger.contract import LOGS, load_contract
    from scavenger.engines.spark import SparkEngine
    from scavenger.io import sources
    from scavenger.policies import scoring_sql as S

    day = dt.date(2026, 1, 1)
    src = sources.describe(hostile_logs(str(tmp_path), days=1), load_contract(LOGS), day, day)
    eng = SparkEngine(spark, "test")
    eng.read("tr_logs", src, load_contract(LOGS), [day])
    got = eng.fetch(S.contexts("tr_logs"), "contexts")
    want = {S.ctx_key(cid, ctx): ctx for cid, ctx in HOSTILE_CONTEXTS}
    assert sorted(got["ctx_key"]) == sorted(want) and len(want) == 16
    for key, singles in zip(got["ctx_key"], got["singles"]):
        entries = [S.ctx_key(None, {k: v})[1:] for k, v in sorted((want[key] or {}).items())]   # '|k=v' -> 'k=v'
        assert ([] if singles is None else list(singles)) == entries, key
