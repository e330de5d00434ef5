"""Check e (propensity calibration) on the Open Bandit Dataset sample (issue 5, check e).

Each OBD campaign (all / men / women) has its own items and its own uniform propensity (1/80, 1/34, 1/46); the
ingest writes the campaign as ``context_id`` and prefixes item ids with it, so context_id partitions the ads.
Pooled per logging policy the shown ads' propensities sum to 3 and every expectation is off by the campaign
shares: a false failure. Within the campaign (the default scope ``auto`` finds the partition) the random logs
pass, and the same logs with one ad's propensity doubled fail. Numbers are checked against pandas on the CSVs.

The ingest (Spark) runs once for the module and writes Parquet; the gate's pass and checks run on DuckDB over it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scavenger.checks import assumptions as A
from scavenger.checks import judge as J
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import GateConfig, describe_inputs
from scavenger.pipelines.validate import validate

CAMPAIGNS = {"all": 80, "men": 34, "women": 46}
BAD_AD, BAD_ITEM = "all/14", 14


def _rows(rows, check):
    return [r for r in rows if r["check"] == check]


@pytest.fixture(scope="module")
def obd_parquet(spark, obd_dir, tmp_path_factory):
    """The random and the bts logs of the sample through the ingest, as Parquet partitioned by dt."""
    from scavenger.contract import write_partitioned
    from scavenger.obd import ingest_obd

    root = tmp_path_factory.mktemp("obd")
    for policy in ("random", "bts"):
        write_partitioned(ingest_obd(spark, obd_dir, policies=(policy,)), str(root / policy))
    return root


@pytest.fixture(scope="module")
def obd_random(obd_parquet):
    return str(obd_parquet / "random")


@pytest.fixture(scope="module")
def raw(obd_dir):
    """The random CSVs with pandas: campaign, day, position, ad, propensity."""
    frames = []
    for campaign in CAMPAIGNS:
        d = pd.read_csv(obd_dir / "random" / campaign / f"{campaign}.csv",
                        usecols=["timestamp", "item_id", "position", "propensity_score"])
        frames.append(pd.DataFrame({"campaign": campaign, "day": pd.to_datetime(d["timestamp"]).dt.strftime("%Y-%m-%d"),
                                    "position": d["position"], "ad": campaign + "/" + d["item_id"].astype(str),
                                    "p": d["propensity_score"]}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def mislogged(obd_random, tmp_path_factory):
    """The same logs with the propensity of one ad (all/14) logged twice too high (each file rewritten with
    pyarrow at the same place of a copy)."""
    src, dst = Path(obd_random), tmp_path_factory.mktemp("obd_bad") / "logs"
    for f in src.glob("dt=*/*.parquet"):
        table = pq.read_table(f)
        rows = table.to_pylist()
        for r in rows:
            for s in r["slots"]:
                if s["ad_id"] == BAD_AD:
                    s["propensity"] *= 2.0
        (dst / f.parent.name).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), dst / f.parent.name / f.name)
    return str(dst)


def gate(logs, scope: str = "auto"):
    """Check e through the gate of `validate` (DuckDB): the window's statistics and its verdict rows."""
    eng = DuckDBEngine("test")
    try:
        v = validate(eng, describe_inputs(logs), None, ("e",),
                     GateConfig(assumptions=A.AssumptionConfig(calibration_scope=scope), great_expectations=False,
                                mode="report"))
    finally:
        eng.close()
    assert v.window.counts["logs"]["rows_quarantined"] == 0       # every OBD row is clean
    return v.window.stats, v.window.verdicts


def _window_numbers(raw: pd.DataFrame) -> pd.DataFrame:
    """O, E, var per (campaign, ad) over days and positions, E = sum over (day, position) cells where the ad was
    shown of N(campaign, day, position) * p (p constant in every cell of the random logs)."""
    n = raw.groupby(["campaign", "day", "position"]).size().rename("N").reset_index()
    cells = raw.groupby(["campaign", "day", "position", "ad"]).agg(o=("p", "size"), p=("p", "first")).reset_index()
    cells = cells.merge(n, on=["campaign", "day", "position"])
    cells["e"] = cells["N"] * cells["p"]
    cells["var"] = cells["e"] * (1 - cells["p"])
    out = cells.groupby(["campaign", "ad"]).agg(o=("o", "sum"), e=("e", "sum"), var=("var", "sum")).reset_index()
    out["z"] = (out["o"] - out["e"]) / np.sqrt(out["var"])
    out["rel"] = out["o"] / out["e"] - 1
    return out


def test_context_id_partitions_the_campaigns(obd_random, raw):
    stats, _ = gate(obd_random)
    slot = J.slot_table(stats)
    strata = A.partition_strata(slot)
    assert set(strata) == {"random"}
    of_ad = strata["random"]
    assert of_ad.groupby(of_ad).size().to_dict() == CAMPAIGNS
    assert all(of_ad[ad] == ad.split("/")[0] for ad in of_ad.index)
    # the window statistics equal pandas on the CSVs
    cal = A.calibration_slot(slot, strata)
    events = cal.groupby(["logging_policy", "stratum", "dt", "position"], as_index=False).agg(events=("n", "sum"))
    got = A.window_calibration(A.calibration_cells(cal, events, 5.0), 5.0).set_index("ad_id")
    want = _window_numbers(raw).set_index("ad")
    assert len(got) == len(want) == sum(CAMPAIGNS.values())
    got = got.loc[want.index]
    assert (got["n"].to_numpy() == want["o"].to_numpy()).all()
    np.testing.assert_allclose(got["expected"].to_numpy(), want["e"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(got["z"].to_numpy(), want["z"].to_numpy(), rtol=1e-9, atol=1e-12)


def test_obd_random_logs_pass_check_e(obd_random, raw):
    _, rows = gate(obd_random)
    per_position = _rows(rows, "e.calibration")
    assert [r["scope"] for r in per_position] == [f"policy=random position={k}" for k in (1, 2, 3)]
    assert all(r["verdict"] == "pass" and r["statistic"] == 0.0 for r in per_position), per_position
    (window,) = _rows(rows, "e.calibration_window")
    assert window["verdict"] == "pass" and window["statistic"] == 0.0
    want = _window_numbers(raw)
    assert want["z"].abs().max() < 4.0                        # the data: no ad is off
    assert f"{len(want)} ads" in window["message"] and f"max |O/E-1|={want['rel'].abs().max():.4f}" in window["message"]


def test_pooled_scope_is_the_false_failure(obd_random, raw):
    """Pooled over the campaigns (the old behaviour, now --calibration-scope policy) the shown ads' propensities
    sum to 80/80 + 34/34 + 46/46 = 3 on every (day, position)."""
    _, rows = gate(obd_random, "policy")
    per_position = _rows(rows, "e.calibration")
    sums = (raw.drop_duplicates(["day", "position", "ad"]).groupby(["position", "day"])["p"].sum()
            .groupby("position").max())
    assert len(per_position) == 3 and all(r["verdict"] == "fail" for r in per_position)
    for r, k in zip(per_position, (1, 2, 3)):
        assert r["statistic"] == pytest.approx(sums[k], rel=1e-12)
        assert r["statistic"] == pytest.approx(3.0, abs=1e-9)


def test_fixed_scope_by_context_map_key_passes(obd_random):
    _, rows = gate(obd_random, "context:campaign")
    e = [r for r in rows if r["check"].startswith("e.")]
    assert len(e) == 4 and {r["verdict"] for r in e} == {"pass"}
    assert "within each value of context:campaign" in e[0]["message"]


def test_mislogged_ad_fails_check_e(mislogged, raw):
    _, rows = gate(mislogged)
    bad = raw.assign(p=np.where(raw["ad"] == BAD_AD, 2 * raw["p"], raw["p"]))
    # per position: the 'all' campaign's shown ads now sum to 1 + 1/80 on the days every ad was shown
    sums = (bad.drop_duplicates(["campaign", "day", "position", "ad"]).groupby(["position", "campaign", "day"])["p"]
            .sum().groupby("position").max())
    per_position = _rows(rows, "e.calibration")
    assert len(per_position) == 3
    for r, k in zip(per_position, (1, 2, 3)):
        assert r["verdict"] == "fail" and r["statistic"] == pytest.approx(sums[k], rel=1e-12)
        assert r["statistic"] == pytest.approx(1 + 1 / 80, rel=1e-12)
    # over the window: the ad was shown about half as often as its logged propensities say
    want = _window_numbers(bad).set_index("ad")
    w = want.loc[BAD_AD]
    assert w["z"] < -4.0 and (want.drop(index=BAD_AD)["z"].abs() < 4.0).all()
    (window,) = _rows(rows, "e.calibration_window")
    assert window["verdict"] == "fail"
    assert window["statistic"] == pytest.approx(abs(w["rel"]), rel=1e-9)
    assert window["statistic"] == pytest.approx(0.5, abs=0.1)
    assert f"ad {BAD_AD} (stratum all) shown {int(w['o'])} times" in window["message"]


def test_obd_bts_logs_are_not_testable(obd_parquet):
    """Bernoulli Thompson Sampling: propensities vary within a day, so check e warns instead of testing the few
    cells that happen to look constant."""
    _, rows = gate(str(obd_parquet / "bts"))
    e = [r for r in rows if r["check"].startswith("e.")]
    assert len(e) == 3 and {r["verdict"] for r in e} == {"warn"}
    assert all(r["statistic"] > 0.9 for r in e)        # share of varying cells


def test_cli_calibration_scope(obd_random, mislogged, tmp_path):
    from scavenger.cli import main

    good, bad = obd_random, mislogged
    common = ["--checks", "e", "--allow-partial-slates", "--no-great-expectations"]
    assert main(["validate", "--logs", good, "--out", str(tmp_path / "v1"), *common]) == 0
    assert main(["validate", "--logs", bad, "--out", str(tmp_path / "v2"), *common]) == 3
    assert main(["validate", "--logs", good, "--out", str(tmp_path / "v3"), "--calibration-scope", "policy",
                 *common]) == 3
    assert main(["validate", "--logs", good, "--out", str(tmp_path / "v4"), "--calibration-scope", "campaign",
                 *common]) == 2
    assert main(["validate", "--logs", good, "--out", str(tmp_path / "v5"), "--calibration-scope",
                 "context:campaign", *common]) == 0
