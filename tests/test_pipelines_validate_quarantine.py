"""``scavenger validate`` writes its verdicts (validation/) and Data Docs (data_docs/) when the quarantined share
fails the gate (exit 3): they are what tells the user which rows and rules failed. Before, the window raised on
the quarantine check before great-expectations ran and before anything but the quarantine was written."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.reference import build_random, write_parquet
from scavenger.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """2 days of 80 events; 20 of them carry a zero propensity (ZERO_PROPENSITY): 12.5% quarantined > 1%."""
    root = tmp_path_factory.mktemp("vq")
    data = build_random(seed=4, K=2, n_ads=5, days=(0, 1), per_day=80, with_nulls=False)
    for e in data["logs"][::8]:
        e["slots"][0]["propensity"] = 0.0
    logs, decisions = write_parquet(data, str(root / "data"))
    out = root / "val"
    code = main(["validate", "--logs", logs, "--decisions", decisions, "--engine", "duckdb", "--out", str(out),
                 "--max-quarantine-share", "0.01", "--checks", "a"])
    return {"code": code, "out": out, "result": json.loads((out / "result.json").read_text())}


def test_quarantine_failure_exits_3(run):
    res = run["result"]
    assert run["code"] == 3 and res["exit_code"] == 3 and res["status"] == "data_check_failed"
    assert res["summary"]["failed_checks"] == ["quarantine"]
    logs = res["counts"]["logs"]
    assert (logs["rows_in"], logs["rows_used"], logs["rows_quarantined"]) == (160, 140, 20)
    assert logs["by_reason"] == {"ZERO_PROPENSITY": 20}
    assert res["counts"]["decisions"]["rows_quarantined"] == 100    # the 20 events' decisions, 5 targets each
    assert res["message"] == ("20 of 160 rows quarantined (12.5000%) > 1.0000% (reasons: ZERO_PROPENSITY: 20); fix "
                              "the upstream data (see quarantine/) or raise --max-quarantine-share; 100 of 800 rows "
                              "quarantined (12.5000%) > 1.0000% (reasons: EVENT_QUARANTINED: 100); fix the upstream "
                              "data (see quarantine/) or raise --max-quarantine-share")


def test_validation_and_data_docs_written(run):
    out, res = run["out"], run["result"]
    val = pd.read_parquet(out / "validation")
    assert len(val) == len(res["verdicts"]) and res["outputs"]["validation"] == str(out / "validation")
    (q,) = val[(val["check"] == "quarantine") & (val["scope"] == "impression_log")].to_dict("records")
    assert q["verdict"] == "fail" and q["statistic"] == pytest.approx(20 / 160, rel=1e-12)
    assert set(val["check"]) >= {"a.context_independence", "ge.impression_log.daily", "ge.decisions.daily"}
    zero = val[(val["check"] == "ge.impression_log.daily") & val["scope"].str.contains("column=ZERO_PROPENSITY")]
    assert list(zero["message"]) == ["2 unexpected of 2 rows; rows are quarantined as ZERO_PROPENSITY"]
    assert (out / "data_docs" / "index.html").stat().st_size > 1000
    assert res["outputs"]["data_docs"] == str(out / "data_docs" / "index.html")
    assert list((out / "data_docs").rglob("*.html"))[1:], "Data Docs hold validation pages beside the index"
    tables = {t["name"] for t in json.loads((out / "_manifest.json").read_text())["tables"]}
    assert {"validation", "data_docs", "quarantine_logs"} <= tables
