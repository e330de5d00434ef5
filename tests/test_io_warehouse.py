"""Warehouse-native outputs (issue 22): result tables, by-day tables, verdicts and quarantine as partitioned
tables of the session catalog, replaced per dt on a re-run; URIs for every output; a missing database or a scheme
the process cannot write is exit 2 before any work."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.reference import build_random, with_bad_rows, write_parquet
from scavenger.cli import main


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("wh")
    data, _, _ = with_bad_rows(build_random(seed=12, K=2, n_ads=5, days=(0, 1), per_day=60, with_nulls=False,
                                            logging_policies=("lp",)))
    write_parquet(data, str(root))
    return str(root)


def test_catalog_tables_replaced_per_dt(spark, dataset, tmp_path):
    spark.sql("CREATE DATABASE IF NOT EXISTS scv_test")
    argv = ["evaluate", "--logs", f"{dataset}/logs", "--decisions", f"{dataset}/decisions", "--estimators",
            "pi,ips", "--policies", "det,sto", "--by-day", "--catalog", "scv_test", "--max-quarantine-share", "0.5",
            "--no-great-expectations",
            "--gate", "report"]
    assert main(argv + ["--out", str(tmp_path / "a")]) == 0
    first = spark.table("scv_test.estimates").toPandas()
    by_day = spark.table("scv_test.estimates_by_day").toPandas()
    files = pd.read_parquet(tmp_path / "a" / "estimates")
    assert sorted(first["value"].dropna().round(12)) == sorted(files["value"].dropna().round(12))
    assert first["dt"].astype(str).unique().tolist() == ["2026-03-02"]          # the window's last day
    assert sorted(by_day["dt"].astype(str).unique()) == ["2026-03-01", "2026-03-02"]
    q = spark.table("scv_test.quarantine_logs").toPandas()
    assert len(q) > 0 and all(len(c) > 0 for c in q["reason_codes"])
    result = json.loads((tmp_path / "a" / "result.json").read_text())
    assert len(q) == result["counts"]["logs"]["rows_quarantined"]
    # a re-run replaces, never appends; --catalog-days last (the daily DAG's trailing window) writes the by-day
    # rows of the window's last day only, leaving the earlier days' partitions to the runs that own them
    assert main(argv + ["--out", str(tmp_path / "b"), "--catalog-days", "last"]) == 0
    again = spark.table("scv_test.estimates").toPandas()
    assert len(again) == len(first) and set(again["run_id"]) != set(first["run_id"])
    by_day_again = spark.table("scv_test.estimates_by_day").toPandas()
    assert len(by_day_again) == len(by_day)
    run_of_day = by_day_again.groupby(by_day_again["dt"].astype(str))["run_id"].agg(set).to_dict()
    assert run_of_day["2026-03-01"] == set(by_day.loc[by_day["dt"].astype(str) == "2026-03-01", "run_id"])
    assert run_of_day["2026-03-02"] == set(again["run_id"])
    assert len(spark.table("scv_test.quarantine_logs").toPandas()) == len(q)


def test_missing_database_is_exit_2_before_any_work(spark, dataset, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["adc", "--logs", f"{dataset}/logs", "--catalog", "no_such_db", "--out", str(out)])
    assert code == 2
    assert "no_such_db" in capsys.readouterr().err
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "bad_arguments" and not (out / "adc").exists()


def test_catalog_needs_spark(dataset, tmp_path, capsys):
    assert main(["adc", "--logs", f"{dataset}/logs", "--catalog", "scv", "--engine", "duckdb",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--engine spark" in capsys.readouterr().err


def test_file_uris_everywhere(dataset, tmp_path):
    """file:// for inputs, --out and --stats-dir: no stray relative 'file:' directory, outputs where they belong."""
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(["evaluate", "--logs", f"file://{dataset}/logs", "--decisions", f"file://{dataset}/decisions",
                     "--out", f"file://{tmp_path}/ev", "--stats-dir", f"file://{tmp_path}/stats", "--estimators",
                     "pi", "--policies", "det,sto", "--max-quarantine-share", "0.5", "--no-great-expectations",
                     "--gate", "report"])
    finally:
        os.chdir(cwd)
    assert code == 0
    assert not (tmp_path / "file:").exists()
    assert (tmp_path / "ev" / "estimates" / "part-0.parquet").exists()
    assert (tmp_path / "stats" / "_manifest").is_dir()


def test_unknown_scheme_is_exit_2(dataset, tmp_path, capsys):
    assert main(["adc", "--logs", f"{dataset}/logs", "--out", "nosuchscheme://bucket/x"]) == 2
    assert "nosuchscheme" in capsys.readouterr().err
