"""No number the data cannot identify, on hand-made edge cases (no engine): an ADC whose rewards show no variation
gets no interval of width 0; a factored target on a position without an ADC is not identified (not C = 0);
wPI / SNIPS without a positive denominator are not identified; and the slate family's reason for too few events
says which case it is."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from scavenger.estimators import attention_decay as A
from scavenger.estimators import factored as F
from scavenger.estimators import slate as S
from scavenger.estimators.slate_moments import SlateMoments
from scavenger.estimators import adc_family as E
from helpers.estimates import estimate_rows
from helpers.estimates import all_slate_estimates


class _Stats:
    def __init__(self, **tables):
        self.tables = tables

    def table(self, name):
        return self.tables.get(name, pd.DataFrame())


def _ad_position(cells, boot: int = 0) -> pd.DataFrame:
    """Rows (ad, position, m, c) with 0/1 rewards (c2 = c); ``boot`` replicates equal to the data."""
    rows = [dict(logging_policy="L", fold=0, ad_id=a, position=p, m=float(m), c=float(c), c2=float(c))
            for a, p, m, c in cells]
    df = pd.DataFrame(rows)
    if boot:
        df["m_boot"] = [[m] * boot for m in df["m"]]
        df["c_boot"] = [[c] * boot for c in df["c"]]
    return df


# ---- 1. ADC: no width-0 interval where the rewards show no variation ----------------------------------------
@pytest.mark.parametrize("clicks, coef", [(0, 0.0), (1, 1.0)])
def test_adc_without_reward_variation_has_no_interval(clicks, coef):
    # no click at position 2 (clicks 0; 2 of 5 at position 1), or every impression clicked at 1 and 2 (clicks 1):
    # before, naive gave [C, C] and the alpha methods [C - 1e-6, C + 1e-6] from the 1e-12 floor of s2
    m = 5 if clicks == 0 else 3
    cells = [(a, p, m, (2 if p == 1 else 0) if clicks == 0 else m) for a in ("1", "01", "é") for p in (1, 2)]
    ap = _ad_position(cells, boot=4)
    table = A.adc_table(ap, level=0.95, smoothing=10.0)
    two = table[table["position"] == 2]
    assert len(two) == 8 and (two["coefficient"] == coef).all()
    assert (two["std_error"] == 0.0).all() and two["ci_low"].isna().all() and two["ci_high"].isna().all()
    one = table[table["position"] == 1]            # C_1 = 1 is the reference, not an estimate: [1, 1] stays
    assert (one["ci_low"] == 1.0).all() and (one["ci_high"] == 1.0).all()
    rows = E.adc_rows(_Stats(ad_position=ap.drop(columns=["m_boot", "c_boot"])), A.METHODS, 0.95, 2.0, 10.0)
    two = rows[rows["position"] == 2]
    assert two["identified"].all() and (two["coefficient"] == coef).all() and two["ci_low"].isna().all()
    assert two["reason"].str.contains("no interval: the rewards at position 2").all()
    assert two["reason"].str.contains("width 0 would claim certainty").all()
    assert rows.loc[rows["position"] == 1, "reason"].isna().all()


def test_adc_with_reward_variation_keeps_its_interval():
    cells = [(a, p, 5, c) for a, cs in (("x", (2, 1)), ("y", (3, 2))) for p, c in zip((1, 2), cs)]
    t = A.adc_table(_ad_position(cells), methods=("naive",), bootstrap=False).set_index("position")
    R = (3 / 10) / (5 / 10)
    var = R * R * ((0.3 * 0.7 / 10) / 0.3 ** 2 + (0.5 * 0.5 / 10) / 0.5 ** 2)
    assert math.isclose(t.loc[2, "coefficient"], R) and math.isclose(t.loc[2, "std_error"], math.sqrt(var))
    assert t.loc[2, "ci_high"] > t.loc[2, "ci_low"]


# ---- 2. factored: a target position without an ADC is not identified -------------------------------------------
def _factored_case(pos_b: int = 4):
    fac = pd.DataFrame({"ad_id": ["a", "a"], "pos_i": [1, 1], "pos_j": [1, 4], "s_rp": [5.0, 5.0],
                        "s_r2p": [5.0, 5.0]})
    fsq = pd.DataFrame({"ad_id": ["a"] * 4, "pos_i": [1] * 4, "pos_j": [1, 1, 4, 4], "pos_j2": [1, 4, 1, 4],
                        "s_r2pp": [2.5] * 4})
    tp = pd.DataFrame({"ad_id": ["a", "b"], "pos_j": [1, pos_b], "s_p": [10.0, 10.0]})
    return fac, fsq, tp, pd.Series({"a": 20.0})


def test_factored_target_beyond_the_adc_is_not_identified():
    fac, fsq, tp, T = _factored_case()
    est = F.factored_estimate(fac, fsq, T, np.array([1.0, 0.6, 0.5]), placements=tp)
    # before: value 0.25 (C_4 counted as 0) and unsupported_share 0.0 (b's mass at 4 dropped)
    assert est["identified"] is False and math.isnan(est["value"]) and math.isnan(est["unsupported_share"])
    assert "no coefficient at position(s) 4" in est["reason"] and "pass --adc" in est["reason"]
    # with C_4 given they are a value: (5 + 5 C_4) / 20, and b's attention 10 C_4 of 10 + 10 C_4 is unsupported
    est = F.factored_estimate(fac, fsq, T, np.array([1.0, 0.6, 0.5, 0.4]), placements=tp)
    assert est["identified"] and math.isclose(est["value"], (5 + 5 * 0.4) / 20)
    assert math.isclose(est["unsupported_share"], 4.0 / (10 + 4))
    # a NaN coefficient inside 1..K is the same case
    est = F.factored_estimate(fac, fsq, T, np.array([1.0, 0.6, 0.5, np.nan]))
    assert not est["identified"] and "position(s) 4" in est["reason"]


def test_stored_adc_table_may_cover_positions_beyond_the_logs(tmp_path):
    # the advice "pass --adc with a table covering position 4" must work on logs of K = 3: the vector keeps C_4
    path = tmp_path / "adc.csv"
    pd.DataFrame({"position": [1, 2, 3, 4, 6], "method": "heuristic", "coefficient": [1.0, 0.6, 0.5, 0.4, 0.3]}
                 ).to_csv(path, index=False)
    ctx = E.AdcContext(options=SimpleNamespace(adc=str(path), adc_method="heuristic", level=0.95, dcg_base=2.0))
    stats = SimpleNamespace(K=3, table=lambda name: pd.DataFrame())
    E.resolve_adc(stats, ctx)
    assert ctx.adc_reason is None and np.allclose(ctx.C[:4], [1.0, 0.6, 0.5, 0.4]) and np.isnan(ctx.C[4])
    assert ctx.C[5] == 0.3
    fac, fsq, tp, T = _factored_case(pos_b=5)
    est = F.factored_estimate(fac, fsq, T, ctx.C, placements=tp)          # b at 5, where the table has a gap
    assert not est["identified"] and "position(s) 5" in est["reason"]


# ---- 3. wPI and SNIPS without a positive denominator --------------------------------------------------------
def test_wpi_with_nonpositive_sum_of_g_is_not_identified():
    m = SlateMoments.from_arrays(np.array([1.0, 0.0]), np.array([[2.0, 0.0], [0.0, 0.0]]))   # G = 1, -1: sum 0
    est = S.wpi(m)
    assert est.identified is False and math.isnan(est.value) and est.interval_kind == "none"
    assert "sum to 0 <= 0" in est.reason and "no denominator" in est.reason
    m = SlateMoments.from_arrays(np.array([1.0, 0.0]), np.array([[0.5, 0.0], [0.0, 0.0]]))   # sum G = -1.5
    assert not S.wpi(m).identified and "sum to -1.5 <= 0" in S.wpi(m).reason
    assert S.pi(m).identified and math.isclose(S.pi(m).value, -0.25)                    # mean(r G), no ratio


def test_snips_with_no_match_and_empty_moments_are_not_identified():
    m = SlateMoments.from_arrays(np.array([1.0, 0.0]), np.array([[2.0, 0.0], [0.0, 1.0]]))   # W = 0, 0
    est = S.snips(m)
    assert not est.identified and "sum W = 0" in est.reason and math.isnan(est.value)
    empty = SlateMoments.from_arrays(np.zeros(0), np.zeros((0, 2)))
    for e in all_slate_estimates(empty):
        assert not e.identified and "no event to average" in e.reason, e.estimator


# ---- 4. the slate family's reason for too few events ----------------------------------------------------------
def _slate_stats(r, Y, missing: int, n_all: int):
    flat = SlateMoments.from_arrays(np.asarray(r, float), np.asarray(Y, float), missing).to_flat()
    sm = pd.DataFrame([{**flat, "dt": "2024-01-01", "policy_id": "p", "logging_policy": "L", "fold": 0}])
    pe = pd.DataFrame({"policy_id": ["p"], "n_events": [n_all]})
    return _Stats(slate_moments=sm if len(r) or missing else pd.DataFrame(), policy_events=pe)


@pytest.mark.parametrize("r, Y, missing, n_all, want", [
    ([1.0], [[2.0, 1.0]], 0, 1, "only one event logs every propensity"),
    ([1.0], [[2.0, 1.0]], 3, 4, "only one event logs every propensity of the slots it holds; 3 event(s) lack"),
    ([], np.zeros((0, 2)), 5, 5, "no event logs every propensity of the slots it holds (propensity-free logs; 5"),
    ([], np.zeros((0, 2)), 0, 0, "the policy decides no event in the window"),
])
def test_slate_rows_reason_matches_the_case(r, Y, missing, n_all, want):
    rows = estimate_rows(_slate_stats(r, Y, missing, n_all), ["p"], ["slate_ips", "slate_wpi"],
                         SimpleNamespace(level=0.95, prior_mean=None, reward_bounds=None))
    assert [x["identified"] for x in rows] == [False, False]
    assert all(want in x["reason"] for x in rows), rows[0]["reason"]
    assert [x["n_events"] for x in rows] == [len(r)] * 2     # the one event is counted (before: 0)
    if n_all == 1:
        assert "needs logged propensities" not in rows[0]["reason"] and "need at least two" in rows[0]["reason"]


def test_a_target_that_leaves_a_held_position_empty_is_not_identified_for_the_weights():
    """K = 3 logs; one target lists only position 1 (a simple decision), another positions 1 and 3 (the general
    path), a third every position. The first two leave a held position empty on every event: pi_k = 0 there gave
    Y_k = 0 and PI = mean r (1 - K + Y_1) < 0 for rewards >= 0 (the helper's example: -0.666). They are not
    identified for the IPS/PI family, with the count; the full target keeps its numbers. On DuckDB; the statement is
    the same on Spark (tests/test_engines.py runs policy_groups on both)."""
    import copy

    from helpers.reference import build_random
    from test_estimators_scavenging import run_evaluate

    data = build_random(seed=5, K=3, n_ads=6, days=(0,), per_day=150, logging_policies=("lp",), with_nulls=False)
    full = [d for d in data["decisions"] if d["policy_id"] == "det"]
    short1, short13 = copy.deepcopy(full), copy.deepcopy(full)
    for d in short1:
        d["policy_id"], d["slots"] = "short1", [s for s in d["slots"] if s["position"] == 1]
    for d in short13:
        d["policy_id"], d["slots"] = "short13", [s for s in d["slots"] if s["position"] in (1, 3)]
    data = {**data, "decisions": full + short1 + short13}
    ev, eng = run_evaluate(data, ["pi", "ips"])
    try:
        est = ev.estimates.set_index(["policy_id", "estimator"])
        n = len(full)
        for p in ("short1", "short13"):
            for e in ("slate_pi", "slate_ips"):
                r = est.loc[(p, e)]
                r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
                assert not r["identified"] and math.isnan(r["value"]), (p, e)
                assert f"lists no ad at a position the logs hold on {n} of {n} events" in r["reason"]
        r = est.loc[("det", "slate_pi")]
        r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
        assert r["identified"] and np.isfinite(r["value"])
    finally:
        eng.close()


def test_a_deterministic_target_may_split_an_entry():
    """A deterministic target written with its ad listed twice at a position (probabilities 0.5 + 0.5): the same
    slate, so the same direct-approach and PI estimates as the unsplit decision (before: 'stochastic on every
    event', the direct approach not identified)."""
    import copy

    from helpers.reference import build_random
    from test_estimators_scavenging import run_evaluate

    data = build_random(seed=8, K=2, n_ads=5, days=(0,), per_day=200, logging_policies=("lp",), with_nulls=False)
    det = [d for d in data["decisions"] if d["policy_id"] == "det"]
    split = copy.deepcopy(det)
    for d in split:
        d["policy_id"], d["base_policy"] = "split", None
        d["slots"] = [dict(s, probability=0.5) for s in d["slots"] for _ in range(2)]
    for d in det:
        d["base_policy"] = None
    ev, eng = run_evaluate({**data, "decisions": det + split}, ["scavenging", "pi"])
    try:
        est = ev.estimates
        for e in ("scavenging_slate", "slate_pi"):
            a = est[(est["policy_id"] == "det") & (est["estimator"] == e)].reset_index(drop=True)
            b = est[(est["policy_id"] == "split") & (est["estimator"] == e)].reset_index(drop=True)
            assert len(a) and a["identified"].any(), e
            pd.testing.assert_series_equal(a["value"], b["value"], rtol=1e-12)
            assert a["identified"].tolist() == b["identified"].tolist()
    finally:
        eng.close()
