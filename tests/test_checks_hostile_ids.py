"""Hostile ids (issue: no single row may stall a job): a 10 MB id goes to quarantine in the one pass, as ID_TOO_LONG,
and goes no further (before: one 10 MB ad_id among 600 events made evaluate 3x slower, every table that held the
ad 10 MB wide, and train ran out of memory after 89 s). Small DuckDB data, in process."""
from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from helpers.reference import write_parquet
from scavenger.cli import main
from test_checks_hostile import _reconciles, build

BIG = "A" * (10 << 20)


def _with_row(data: dict, ad) -> dict:
    """``data`` plus a logged event "hostile" whose first ad is ``ad`` (its decisions as any event's) and det2's
    decision for e0-7, whose first ad is ``ad``."""
    out = copy.deepcopy(data)
    ev = copy.deepcopy(out["logs"][0])
    ev["event_id"] = "hostile"
    ev["slots"][0]["ad_id"] = ad
    out["logs"].append(ev)
    for p in ("det", "det2"):
        d = copy.deepcopy(next(x for x in out["decisions"] if x["policy_id"] == p))
        out["decisions"].append(dict(d, event_id="hostile", dt=ev["dt"]))
    d = copy.deepcopy(next(x for x in data["decisions"] if x["policy_id"] == "det" and x["event_id"] == "e0-8"))
    d["slots"][0]["ad_id"] = ad
    out["decisions"].append(dict(d, policy_id="det2", event_id="e0-7"))
    return out


def _evaluate(root, out, *extra) -> tuple[int, dict]:
    code = main(["evaluate", "--logs", str(root / "logs"), "--decisions", str(root / "decisions"), "--out", str(out),
                 "--estimators", "pi,ips,scavenging_slate", *extra])
    return code, json.loads((out / "result.json").read_text())


def test_a_10_mb_id_is_quarantined_and_goes_no_further(tmp_path, capsys):
    """One log row whose ad_id is 10 MB and one decision whose ad_id is 10 MB are quarantined as ID_TOO_LONG (the
    row's other decisions as EVENT_QUARANTINED): rows in = used + quarantined, every estimate equals the one
    without those rows (1e-12), the exit code is that of the same rows with a null ad (NULL_AD), and no message,
    summary or result.json carries the value (the quarantine holds it, as read)."""
    # 600 events: about 9 match a deterministic target's slate of 4 x 4 x 4, above IPS's minimum of 5
    data = build(tmp_path / "gen", per_day=300, policies=("det", "det2"))
    data["decisions"] = [d for d in data["decisions"] if (d["policy_id"], d["event_id"]) != ("det2", "e0-7")]
    for name, ad in (("base", None), ("big", BIG), ("null", None)):
        write_parquet(data if name == "base" else _with_row(data, ad), str(tmp_path / name))
    capsys.readouterr()
    code, res = _evaluate(tmp_path / "big", tmp_path / "ev", "--max-quarantine-share", "0.01")
    captured = capsys.readouterr()
    assert code == 0
    logs, decs = res["counts"]["logs"], res["counts"]["decisions"]
    assert logs["by_reason"] == {"ID_TOO_LONG": 1} and (logs["rows_in"], logs["rows_quarantined"]) == (601, 1)
    assert decs["by_reason"] == {"ID_TOO_LONG": 1, "EVENT_QUARANTINED": 2} and decs["rows_in"] == 2 * 600 + 2
    _reconciles(logs), _reconciles(decs)
    assert len(captured.out) + len(captured.err) < 20_000 and "AAAAAAAAAA" * 30 not in captured.out + captured.err
    assert (tmp_path / "ev" / "result.json").stat().st_size < 100_000
    q = pq.read_table(tmp_path / "ev" / "quarantine" / "logs").to_pylist()
    assert [(r["event_id"], r["reason_codes"], len(r["slots"][0]["ad_id"])) for r in q] == \
        [("hostile", ["ID_TOO_LONG"], 10 << 20)]
    q = pq.read_table(tmp_path / "ev" / "quarantine" / "decisions").to_pandas()
    assert sorted(map(tuple, q["reason_codes"])) == [("EVENT_QUARANTINED",)] * 2 + [("ID_TOO_LONG",)]

    assert _evaluate(tmp_path / "base", tmp_path / "ev0", "--max-quarantine-share", "0.01")[0] == 0
    keys = ["policy_id", "estimator", "interval_kind"]
    got, want = (pd.read_parquet(tmp_path / d / "estimates").sort_values(keys).reset_index(drop=True)
                 for d in ("ev", "ev0"))
    assert got[keys].equals(want[keys]) and got["identified"].sum() >= 4
    for col in ("value", "std_error", "ci_low", "ci_high"):
        assert np.allclose(got[col].astype(float), want[col].astype(float), rtol=0, atol=1e-12, equal_nan=True), col

    # with the default --max-quarantine-share (0.1%), 1 row of 301 fails the gate as a null ad does
    big, null = (_evaluate(tmp_path / n, tmp_path / f"{n}_default") for n in ("big", "null"))
    assert big[0] == null[0] == 3
    assert null[1]["counts"]["logs"]["by_reason"] == {"NULL_AD": 1}
    assert big[1]["counts"]["logs"]["rows_quarantined"] == null[1]["counts"]["logs"]["rows_quarantined"] == 1


def test_train_leaves_rows_holding_a_10_mb_id_out(tmp_path):
    """A training row whose ad_id is 10 MB and a scoring row whose context value is 10 MB are left out of train and
    counted (train_rows_too_long, score_rows_too_long, a warning): the models decide as without those rows (before:
    the ad crossed with every context token ran train out of memory after 89 s)."""
    import pyarrow as pa

    from scavenger.contract import arrow_schema
    from test_policies_train_edges import _logs, _train

    logs = _logs(tmp_path / "base", {"A": 0.5, "B": 0.3, "C": 0.2}, per_day=100)
    schema = arrow_schema("impression_log", nullable=True)
    schema = schema.remove(schema.get_field_index("dt"))       # the day is the directory's
    rows = pq.read_table(f"{logs}/dt=2026-01-01").to_pylist()
    train_row = dict(rows[0], event_id="hostile-train", slots=[dict(rows[0]["slots"][0], ad_id=BIG)])
    score_row = dict(rows[0], event_id="hostile-score", context=[("f", BIG)])
    hostile = tmp_path / "hostile" / "logs"
    for day, row in (("2026-01-01", train_row), ("2026-01-03", score_row)):
        (hostile / f"dt={day}").mkdir(parents=True)
        pq.write_table(pq.read_table(f"{logs}/dt={day}/part-0.parquet"), hostile / f"dt={day}" / "part-0.parquet")
        pq.write_table(pa.Table.from_pylist([row], schema=schema), hostile / f"dt={day}" / "part-1.parquet")
    (hostile / "dt=2026-01-02").symlink_to(f"{logs}/dt=2026-01-02")
    summary = _train(str(hostile), tmp_path / "out")
    base = _train(logs, tmp_path / "out0")
    assert (summary["counts"]["train_rows_too_long"], summary["counts"]["score_rows_too_long"]) == (1, 1)
    assert summary["counts"]["train_events"] == base["counts"]["train_events"] == 200
    assert any("longer than 1000 characters and were left out" in w for w in summary["warnings"])
    got, want = (pd.read_parquet(tmp_path / o / "decisions").sort_values(["policy_id", "event_id"])
                 for o in ("out", "out0"))
    assert len(got) == len(want) == 2 * 100
    assert got["event_id"].tolist() == want["event_id"].tolist()
    assert [list(map(dict, s)) for s in got["slots"]] == [list(map(dict, s)) for s in want["slots"]]
