"""`scavenger evaluate` end to end (in process, DuckDB): output table and result.json, equality of every row with the
library functions and the slate estimators on row-level moments, stored-statistics reuse, --adc from a stored
table, re-orderings, the gate (exit 3), exit codes, and agreement with the generator's ground truth."""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd
import pytest

from helpers.estimates import note_lift
from helpers.reference import build_random, clean, ref_tables, write_parquet
from scavenger import registry
from scavenger.cli import main
from scavenger.estimators import attention_decay as A
from scavenger.estimators import factored as FA
from scavenger.estimators import slate as SL
from scavenger.estimators import rows as E

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalds")
    data = build_random(seed=31, K=3, n_ads=6, days=(0, 1, 2), per_day=60)
    logs, decs = write_parquet(data, str(root / "in"))
    return data, logs, decs, root


@pytest.fixture(scope="module")
def cli_run(dataset):
    data, logs, decs, root = dataset
    out = root / "out"
    code = main(["evaluate", "--gate", "off", "--logs", logs, "--decisions", decs, "--stats-dir", str(root / "st"),
                 "--out", str(out), "--from", DAYS[0], "--to", DAYS[-1], "--uniform-logging"])
    return code, out


@pytest.fixture(scope="module")
def stored(cli_run, dataset):
    """The window's statistics read back from the store the CLI run wrote (DuckDB; no scan)."""
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.pipelines.common import GateConfig, describe_inputs, run_window
    from scavenger.statistics.scan import StatsConfig

    data, logs, decs, root = dataset
    wanted = registry.resolve(None)
    checks = registry.checks_for(wanted)
    eng = DuckDBEngine("test")
    plan = registry.plan_for(wanted, checks, adcs_given=False)     # the CLI run estimated its ADCs
    window = run_window(eng, describe_inputs(logs, decs), checks, plan,
                        GateConfig(mode="off"), StatsConfig(), str(root / "st"))
    yield window.stats
    eng.close()


def fold_of(event_id: str) -> int:
    """The pass's fair coin per event (statistics/sql/logs.py): parity of the 16th hex digit of md5(event_id)."""
    return int(hashlib.md5(event_id.encode()).hexdigest()[15] in "13579bdf")


def test_evaluate_cli_outputs(cli_run, dataset):
    code, out = cli_run
    data = dataset[0]
    assert code == 0
    est = pd.read_parquet(out / "estimates")
    for col in ("policy_id", "estimator", "value", "std_error", "ci_low", "ci_high", "interval_kind", "n_events",
                "supported_share", "window", "identified", "reason", "checks", "recommended"):
        assert col in est.columns
    assert list(est.columns) == list(registry.ESTIMATE_COLUMNS)
    assert set(est["interval_kind"]) <= {"clt", "el", "bound", "bootstrap", "none"}
    assert set(est["window"]) == {"2026-03-01..2026-03-03"}
    assert {"det", "perm", "sto"} <= set(est["policy_id"])
    assert {"factored", "scavenging_slate", "scavenging_base", "slate_pi", "slate_ips", "reorder"} <= \
        set(est["estimator"])
    # not identified: no number, a reason; an interval of kind "none" has no ends
    bad = est[~est["identified"]]
    assert len(bad) and bad["value"].isna().all() and bad["reason"].notna().all()
    none = est[est["interval_kind"] == "none"]
    assert none["ci_low"].isna().all() and none["ci_high"].isna().all() and none["reason"].notna().all()
    ok = est[est["identified"] & (est["interval_kind"] != "none")]
    assert np.isfinite(ok[["value", "ci_low", "ci_high"]].to_numpy(float)).all()
    assert est.groupby("policy_id")["recommended"].sum().le(1).all()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["counts"]["days_scanned"] == 3
    assert res["counts"]["logs"]["rows_used"] == len(clean(data)[0]) < len(data["logs"])
    assert res["counts"]["logs"]["rows_in"] == 180
    diag = pd.read_parquet(out / "diagnostics")
    cov = diag[(diag["policy_id"] == "det") & (diag["metric"] == "decision_coverage")]["value"].iloc[0]
    assert cov == 1.0


def _ref_moments(data, policy):
    """SlateMoments of ``policy`` from the row-level reference: all events, and each fold's (all logging policies
    together)."""
    def total(d):
        m = None
        for (pid, _), mm in ref_tables(d)["slate_moments"].items():
            if pid == policy:
                m = mm if m is None else m.add(mm)
        return m

    folds = tuple(total(dict(data, logs=[e for e in data["logs"] if fold_of(e["event_id"]) == f]))
                  for f in (0, 1))
    return total(data), folds


def test_slate_rows_equal_row_level_moments(cli_run, dataset, stored):
    """The slate OPE rows equal the slate estimators on SlateMoments.from_arrays of the raw rows (all logging
    policies together; pi_beta cross-fitted on the events' folds), with the intervals of estimators/intervals.py
    (empirical likelihood for IPS/SNIPS over the window's weight and reward bounds, CLT or none for the others)."""
    from helpers.estimates import interval_of

    code, out = cli_run
    data = dataset[0]
    est = pd.read_parquet(out / "estimates")
    bounds = E.weight_and_reward_bounds(stored)
    # perm shows the logged ads in a shuffled order on every event: pi_k(a_k) is 1 for the ads it left in place
    # because they were logged, so E_mu[Y_k] = 1 fails and no slate estimate is given (see reorder)
    perm = est[(est["policy_id"] == "perm") & est["estimator"].str.startswith("slate_")]
    assert len(perm) == 6 and not perm["identified"].any()
    assert perm["reason"].str.contains("re-orders the logged slate").all() and perm["value"].isna().all()
    for p in ("det", "sto"):
        m, folds = _ref_moments(data, p)
        fns = {"slate_ips": lambda: SL.ips(m), "slate_snips": lambda: SL.snips(m), "slate_pi": lambda: SL.pi(m),
               "slate_wpi": lambda: SL.wpi(m), "slate_pi_plus_plus": lambda: SL.pi_plus_plus(m),
               "slate_pi_beta": lambda: SL.pi_beta(m, folds=folds)}
        got = est[(est["policy_id"] == p) & est["estimator"].str.startswith("slate_")].set_index("estimator")
        assert set(got.index) == set(fns) == set(registry.GROUPS["slate"])
        for name, fn in fns.items():
            want = fn()
            lo, hi, kind, _ = interval_of(name)(want, m, *bounds, 0.95)
            assert got.loc[name, "interval_kind"] == kind, (p, name)
            for col, b in (("value", want.value), ("std_error", want.std_error), ("ci_low", lo), ("ci_high", hi)):
                a = got.loc[name, col]
                assert (np.isnan(a) and np.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (p, name, col)
        assert (got["n_events"] == m.n).all() and (got["n_missing_propensity"] == m.n_missing_propensity).all()
        assert m.n_missing_propensity > 0


def test_factored_row_equals_library(cli_run, dataset, stored):
    code, out = cli_run
    est = pd.read_parquet(out / "estimates")
    stats = stored
    assert stats.scanned == [] and len(stats.loaded) == 3  # all days come from the store: no scan
    method = est.loc[est["estimator"] == "factored", "adc_method"].iloc[0]     # the CLI's default ADC method
    assert method in A.METHODS
    C = A.adc_vector(A.adc_table(stats.table("ad_position"), smoothing=A.SMOOTHING, bootstrap=False),
                     method, 3)   # the jobs' smoothing
    fac, fsq = stats.table("factored"), stats.table("factored_sq")
    T_a = FA.ad_impressions(stats.table("ad_position"))
    perm = est[(est["policy_id"] == "perm") & (est["estimator"] == "factored")].iloc[0]
    assert not perm["identified"] and "re-orders" in perm["reason"]     # see reorder
    for p in ("det", "sto"):
        want = FA.factored_estimate(fac[fac.policy_id == p], fsq[fsq.policy_id == p], T_a, C)
        got = est[(est["policy_id"] == p) & (est["estimator"] == "factored")].iloc[0]
        assert math.isclose(got["value"], want["value"], rel_tol=1e-12)
        assert got["adc_source"] == "estimated" and got["adc_method"] == method
        # the estimated ADC's own uncertainty is propagated (joint delta method, estimators/propagate.py): a
        # different standard error from the one that treats C as known
        assert math.isfinite(got["std_error"]) and got["std_error"] > 0
        assert not math.isclose(got["std_error"], want["std_error"], rel_tol=1e-9)
    adc = pd.read_parquet(out / "adc")
    used = adc[(adc["method"] == method) & (adc["interval_kind"] == "delta")].sort_values("position")
    assert np.allclose(used["coefficient"].to_numpy(float), C, rtol=1e-12)     # the ADC table written beside


def _factored_run(args: list, out) -> tuple[dict, pd.DataFrame]:
    """`evaluate --estimators factored`: the re-ordering target perm is not identified for factored (its choice
    depends on the logged slate), and a named estimator the data cannot identify exits 3 -- with the estimates of
    every other policy written beside the reason."""
    assert main(["evaluate", "--gate", "off", *args, "--out", str(out), "--estimators", "factored"]) == 3
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "data_check_failed" and res["message"].count("factored (") == 1
    assert "factored (perm): the target re-orders the logged ads" in res["message"]
    est = pd.read_parquet(out / "estimates")
    assert set(est.loc[~est["identified"], "policy_id"]) == {"perm"} and set(est["estimator"]) == {"factored"}
    return res, est


def test_stored_adc_table_and_reuse(dataset, cli_run, tmp_path):
    data, logs, decs, root = dataset
    assert cli_run[0] == 0                  # the window's days are in the store (root/st) the CLI run wrote
    assert main(["adc", "--gate", "off", "--logs", logs, "--out", str(tmp_path / "adc")]) == 0
    # a stored ADC table with known coefficients: the factored value follows it without a rescan
    table = pd.DataFrame({"position": [1, 2, 3], "method": "given", "coefficient": [1.0, 0.5, 0.25]})
    table.to_parquet(tmp_path / "given.parquet")
    inputs = ["--logs", logs, "--decisions", decs, "--stats-dir", str(root / "st")]
    res, est = _factored_run([*inputs, "--adc", str(tmp_path / "given.parquet"), "--adc-method", "given"],
                             tmp_path / "ev")
    assert res["counts"]["days_loaded"] == 3 and res["counts"]["days_scanned"] == 0
    assert res["counts"]["rows_read"] == 0
    assert set(est["adc_source"]) == {str(tmp_path / "given.parquet")} and set(est["adc_method"]) == {"given"}
    import scavenger.api as api

    stats = api.evaluate(logs, decs, gate="off", stats_dir=str(root / "st"),
                         engine="duckdb").stats
    assert stats.scanned == []
    fac, fsq = stats.table("factored"), stats.table("factored_sq")
    for p in ("det", "sto"):
        want = FA.factored_estimate(fac[fac.policy_id == p], fsq[fsq.policy_id == p],
                                    FA.ad_impressions(stats.table("ad_position")), np.array([1.0, 0.5, 0.25]))
        got = est[est["policy_id"] == p].iloc[0]
        assert math.isclose(got["value"], want["value"], rel_tol=1e-12)
        assert math.isclose(got["std_error"], want["std_error"], rel_tol=1e-12)   # a given ADC carries no error
    # the ADC table written by `scavenger adc` is accepted as --adc (the default method's row)
    _, est2 = _factored_run([*inputs, "--adc", str(tmp_path / "adc")], tmp_path / "ev2")
    assert set(est2["adc_source"]) == {str(tmp_path / "adc")} and est2.loc[est2["policy_id"] == "det",
                                                                            "identified"].all()
    # a method the stored table does not hold exits 2 before any scan
    assert main(["evaluate", "--gate", "off", "--logs", logs, "--decisions", decs, "--out", str(tmp_path / "ev3"),
                 "--adc", str(tmp_path / "given.parquet"), "--estimators", "factored"]) == 2


def test_reorder_policies_and_usage_errors(dataset, tmp_path):
    data, logs, decs, root = dataset
    out = tmp_path / "ro"
    code = main(["evaluate", "--gate", "off", "--logs", logs, "--stats-dir", str(tmp_path / "st_ro"), "--out",
                 str(out), "--from", "2026-03-02", "--to", "2026-03-03",
                 "--reorder", "random:4", "--reorder", "ctr:2026-03-01:2026-03-01", "--estimators", "reorder"])
    assert code == 0
    est = pd.read_parquet(out / "estimates")
    assert set(est["policy_id"]) == {"reorder_random_4", "reorder_ctr_2026-03-01_2026-03-01"}
    assert set(est["estimator"]) == {"reorder"}
    n = sum(1 for e in clean(data)[0] if e["dt"].isoformat() in DAYS[1:])
    assert (est["n_events"] == n).all() and est["identified"].all()
    # errors: overlapping fit window, unknown estimator, bad delta -> exit 2
    assert main(["evaluate", "--gate", "off", "--logs", logs, "--out", str(out), "--from", "2026-03-01",
                 "--reorder", "ctr:2026-03-01:2026-03-02"]) == 2
    assert main(["evaluate", "--gate", "off", "--logs", logs, "--decisions", decs, "--out", str(out),
                 "--estimators", "bogus"]) == 2
    assert main(["evaluate", "--gate", "off", "--logs", logs, "--decisions", decs, "--out", str(out),
                 "--delta", "2"]) == 2
    # neither decisions nor re-orderings
    assert main(["evaluate", "--gate", "off", "--logs", logs, "--out", str(out)]) == 2


def test_reorder_policy_named_like_a_decisions_policy_is_refused(dataset, tmp_path, capsys):
    """Decisions holding a policy named reorder_random_4 with --reorder random:4: the two would share one id (every
    second decision quarantined as a duplicate, the estimates mixed), so the run stops before the pass with exit 2
    naming the policy; another seed runs."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    data, logs, decs, root = dataset
    renamed = tmp_path / "decs"
    for f in sorted(Path(decs).rglob("*.parquet")):
        t = pq.read_table(f)
        ids = t.column("policy_id").to_pylist()
        t = t.set_column(t.schema.get_field_index("policy_id"), "policy_id",
                         pa.array(["reorder_random_4" if i == ids[0] else i for i in ids], pa.string()))
        dest = renamed / f.relative_to(decs)
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest)
    args = ["evaluate", "--gate", "off", "--logs", logs, "--decisions", str(renamed), "--out", str(tmp_path / "o")]
    capsys.readouterr()
    assert main(args + ["--reorder", "random:4"]) == 2
    assert "the decisions hold a policy named reorder_random_4" in capsys.readouterr().err
    assert main(args + ["--reorder", "random:5"]) == 0


def test_gate_blocks_with_exit_3(dataset, tmp_path):
    """The data gate (enforce, the default): 12 of 180 log rows are quarantined (null rewards without a slate
    reward), above the 0.1% allowed, so nothing is written and the run exits 3 with the verdicts in result.json --
    those of the quarantine and of the checks the estimator relies on (factored: a, b)."""
    data, logs, decs, root = dataset
    out = tmp_path / "g"
    code = main(["evaluate", "--logs", logs, "--decisions", decs, "--stats-dir", str(root / "st"),
                 "--out", str(out), "--estimators", "factored", "--no-great-expectations"])
    assert code == 3
    res = json.loads((out / "result.json").read_text())
    failed = [v for v in res["verdicts"] if v["verdict"] == "fail"]
    assert res["status"] == "data_check_failed" and failed[0]["check"] == "quarantine"
    assert failed[0]["scope"] == "impression_log" and "12 of 180" in failed[0]["message"]
    assert {v["check"].split(".")[0] for v in res["verdicts"]} - {"quarantine", "input"} == \
        set(registry.checks_for(["factored"]))
    assert not (out / "estimates").exists()


@pytest.fixture(scope="module")
def factored_reorder_run(tmp_path_factory) -> dict:
    """Generator uniform logs (K=4, 20 ads, 2 days; DuckDB: the generator) and the factored (estimated and true
    ADC) and re-ordering evaluations of them (DuckDB, the notebook API)."""
    from scavenger import api
    from scavenger.simulation.generator import GeneratorConfig, generate

    work = tmp_path_factory.mktemp("factored_reorder")
    out = str(work / "gen")
    truth = generate("duckdb", GeneratorConfig(logging="uniform", n_positions=4, n_ads=20, days=2,
                                            events_per_day=20000, seed=7), out)
    pd.DataFrame({"position": [1, 2, 3, 4], "method": "true", "coefficient": truth["adc"]}).to_parquet(
        work / "true_adc.parquet")
    factored = {}
    for adc, method in (("estimate", "variance_optimal"), (str(work / "true_adc.parquet"), "true")):
        factored[method] = api.evaluate(f"{out}/logs", f"{out}/decisions", estimators=["factored"], adc=adc,
                                        adc_method=method, gate="off", engine="duckdb",
                                        stats_dir=str(work / "st")).pandas
    reorder = api.evaluate(f"{out}/logs", None, estimators=["reorder"], date_from="2026-01-02",
                           date_to="2026-01-02", reorder=["random:1", "ctr:2026-01-01:2026-01-01"], gate="off",
                           engine="duckdb", stats_dir=str(work / "st")).pandas
    return {"truth": truth, "factored": factored, "reorder": reorder}


@pytest.mark.slow
def test_generator_truth_factored_and_reorder(factored_reorder_run):
    """Generator uniform logs (K=4, 20 ads, 2 days): the factored estimate of every target (true ADC and estimated
    ADC) lies within 3 sd of its realized true value; a CTR re-ordering fitted on day 1 raises clicks on day 2
    (lift > 1), a random re-ordering does not (lift within 3 sd of 1)."""
    run = factored_reorder_run
    assert set(run["factored"]) == {"variance_optimal", "true"}
    for method, estimates in run["factored"].items():
        assert set(estimates["policy_id"]) >= set(run["truth"]["policies"]), method
        for pid, t in run["truth"]["policies"].items():
            row = estimates[(estimates["policy_id"] == pid) & (estimates["estimator"] == "factored")].iloc[0]
            assert abs(row["value"] - t["realized_value"]) <= 3 * row["std_error"], (pid, method, row["value"])
    est = run["reorder"]
    rows = est[est["estimator"] == "reorder"]
    lift = {p: note_lift(n) for p, n in zip(rows["policy_id"], rows["note"])}
    print(lift)
    ctr = "reorder_ctr_2026-01-01_2026-01-01"
    assert lift[ctr][0] > 1 + 3 * lift[ctr][1]
    assert abs(lift["reorder_random_1"][0] - 1) <= 3 * lift["reorder_random_1"][1]


def test_a_named_policy_whose_events_were_all_quarantined_says_so():
    """--policies A,B where every event B decides was quarantined (a duplicate ad) and A's were not: B was silently
    missing from the estimates (no row, no reason); now each estimator has a row for B saying why."""
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.pipelines.common import GateConfig, describe_inputs
    from scavenger.pipelines.evaluate import EvaluateOptions, evaluate
    from helpers.reference import arrow_tables

    data = build_random(seed=5, K=2, n_ads=5, days=(0,), per_day=40, with_nulls=False)
    bad = data["logs"][:4]
    for ev in bad:
        ev["slots"][1]["ad_id"] = ev["slots"][0]["ad_id"]                 # DUPLICATE_AD: quarantined
    keep = [d for d in data["decisions"] if d["policy_id"] == "det"]
    data["decisions"] = keep + [dict(d, policy_id="B") for d in keep[:4]]
    for named in (["det", "B"], None):      # named with --policies, or found in the decisions (it vanished then)
        eng = DuckDBEngine("test")
        try:
            ev = evaluate(eng, describe_inputs(*arrow_tables(data), policies=named),
                          EvaluateOptions(estimators=["scavenging_slate", "factored"], policies=named),
                          GateConfig(mode="report", great_expectations=False, max_quarantine_share=1.0))
        finally:
            eng.close()
        b = ev.estimates[ev.estimates["policy_id"] == "B"]
        assert set(b["estimator"]) == {"scavenging_slate", "factored"}, ev.estimates[["policy_id", "estimator"]]
        assert not b["identified"].any() and b["reason"].str.contains("none of its decision rows").all(), b
        # named: the job fails (exit 3) for the estimators asked by name; found in the decisions: reported only
        assert any("(B)" in r for r in ev.refused) == bool(named)
        assert ev.estimates[ev.estimates["policy_id"] == "det"]["identified"].any()


@pytest.mark.parametrize("gap", ["empty", "absent"])
def test_by_day_over_a_window_with_an_empty_day(tmp_path, capsys, gap):
    """--by-day where one day of the window has a partition without rows (``empty``: evaluate and adc stopped with
    an internal error, KeyError 'm', 'c', 'c2': the empty day's ad_position had its keys only) or no partition at
    all (``absent``: the day was left out of every table, the summary and result.json without a word). Now that
    day's rows say it has nothing to estimate, naming the day (before: each estimator blamed its own inputs, "no
    base policy", "pass --adc"; the ADC table had no row for the day), the other days are estimated, and an absent
    day is named in result.json, the summary and a warning verdict."""
    import pyarrow.parquet as pq

    data = build_random(seed=3, K=2, n_ads=4, days=(0, 2), per_day=40, with_nulls=False)
    logs, decisions = write_parquet(data, str(tmp_path / "in"))
    for side in (logs, decisions) if gap == "empty" else ():
        first = sorted((tmp_path / "in").glob(f"{side.rsplit('/', 1)[1]}/dt=*/*.parquet"))[0]
        empty = tmp_path / "in" / side.rsplit("/", 1)[1] / "dt=2026-03-02"
        empty.mkdir()
        pq.write_table(pq.read_table(first).slice(0, 0), empty / "part-0.parquet")
    out = tmp_path / "ev"
    assert main(["evaluate", "--logs", logs, "--decisions", decisions, "--out", str(out), "--by-day",
                 "--gate", "report", "--engine", "duckdb", "--no-great-expectations"]) == 0
    by_day = pd.read_parquet(out / "estimates_by_day")
    days = by_day.groupby(by_day["dt"].astype(str))["identified"].any()
    assert len(days) == 3 and not days["2026-03-02"] and days.drop("2026-03-02").all(), days
    why = ("no clean logged event on 2026-03-02 (0 rows read, 0 quarantined): nothing to estimate on that day"
           if gap == "empty" else "no logs on 2026-03-02: --logs holds no row of that day (no dt=2026-03-02 "
           "partition), so nothing to estimate on that day; check the logs' delivery for it")
    assert set(by_day.loc[by_day["dt"].astype(str) == "2026-03-02", "reason"]) == {why}
    res = json.loads((out / "result.json").read_text())
    if gap == "absent":
        assert res["counts"]["days_without_logs"] == ["2026-03-02"] and res["counts"]["days"] == 2
        assert "no logs on 1 day(s) of the window: 2026-03-02" in capsys.readouterr().out
        warn = [v for v in res["verdicts"] if v["check"] == "input" and v["verdict"] == "warn"]
        assert len(warn) == 1 and "no logs on 1 of the window's 3 days (2026-03-02)" in warn[0]["message"]
    else:
        assert "days_without_logs" not in res["counts"]
    assert main(["adc", "--logs", logs, "--out", str(tmp_path / "adc"), "--by-day", "--gate", "report",
                 "--engine", "duckdb", "--no-great-expectations"]) in (0, 3)
    adc = pd.read_parquet(tmp_path / "adc" / "adc_by_day")
    empty = adc[adc["dt"].astype(str) == "2026-03-02"]     # the day's rows say why, as the window's methods
    assert len(empty) == len(pd.read_parquet(tmp_path / "adc" / "adc")) and set(empty["reason"]) == {why}
    assert not empty["identified"].any() and empty["coefficient"].isna().all()
