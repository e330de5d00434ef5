"""Issue 30's ADC side: the cross-fitted variance_optimal and the ADC's uncertainty carried into factored and
re-ordering (joint delta method against a row-level numpy sum), the default method unbiased on a ranker's logs, and
the report's daily estimates. Hand-made tables and numpy; no JVM."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from scavenger.estimators import attention_decay as A
from scavenger.estimators import factored as FA
from scavenger.estimators import propagate as P
from scavenger.pipelines.evaluate import EvaluateOptions

Z95 = float(norm.ppf(0.975))


# ---- the ADC's linearisation and its propagation ----------------------------------------------------------------
def _ranked_day(rng, n=4000, n_ads=10, K=4, eps=0.3, C=(1.0, 0.62, 0.5, 0.4), ranker=True):
    """Ranked logs: epsilon-greedy around a fixed ranking of the most popular ads (x-independent, as a ranker
    fitted on yesterday's clicks), 6 contexts; a factoring-model click per slot. Returns row-level arrays."""
    C = np.asarray(C)
    P = np.random.default_rng(99).uniform(0.03, 0.3, (6, n_ads))
    x = rng.integers(0, 6, n)
    perm = np.argsort(rng.random((n, n_ads)), axis=1)[:, :K]
    prop = np.full((n, K), 1.0 / n_ads)
    if ranker:
        best = np.argsort(-P.mean(0))[:K]
        greedy = rng.random(n) >= eps
        perm[greedy] = best
        prop = eps / n_ads + (1 - eps) * (perm == best[None, :])
    clicks = (rng.random((n, K)) < C[None, :] * P[x[:, None], perm]).astype(float)
    return dict(x=x, perm=perm, clicks=clicks, fold=rng.integers(0, 2, n), prop=prop, C=C, P=P, K=K, n_ads=n_ads)


def _tables(day, targets):
    """ad_position (by fold) and the factored tables of each target (slate per event) from a _ranked_day."""
    perm, clicks, fold, K = day["perm"], day["clicks"], day["fold"], day["K"]
    ad = np.array([f"ad{i}" for i in range(day["n_ads"])])
    rows = []
    for i in range(K):
        df = pd.DataFrame({"fold": fold, "ad_id": ad[perm[:, i]], "c": clicks[:, i], "p": day["prop"][:, i]})
        g = df.groupby(["fold", "ad_id"]).agg(m=("c", "size"), c=("c", "sum"), sum_p=("p", "sum"), n_p=("p", "size"))
        rows.append(g.reset_index().assign(position=i + 1, logging_policy="lp"))
    ap = pd.concat(rows, ignore_index=True).assign(c2=lambda t: t["c"])
    fac, fsq = {}, {}
    for name, tg in targets.items():
        parts = []
        for i in range(K):
            j = np.zeros(len(perm), dtype=int)
            for jj in range(K):
                j[tg[:, jj] == perm[:, i]] = jj + 1
            sel = (clicks[:, i] > 0) & (j > 0)
            parts.append(pd.DataFrame({"ad_id": ad[perm[sel, i]], "pos_i": i + 1, "pos_j": j[sel],
                                       "v": clicks[sel, i]}))
        f = pd.concat(parts).groupby(["ad_id", "pos_i", "pos_j"], as_index=False)["v"].sum()
        fac[name] = f.assign(policy_id=name, s_rp=f["v"], s_r2p=f["v"]).drop(columns="v")
        fsq[name] = f.assign(policy_id=name, pos_j2=f["pos_j"], s_r2pp=f["v"]).drop(columns="v")
    return ap, fac, fsq


@pytest.mark.parametrize("method", ["naive", "heuristic", "variance_optimal"])
def test_adc_influence_gives_the_delta_variance(method):
    ap, _, _ = _tables(_ranked_day(np.random.default_rng(5)), {})
    table = A.adc_table(ap, methods=(method,), bootstrap=False).set_index("position")
    infl = P.influence(ap, method)
    for i in (2, 3, 4):
        t = infl[infl["target"] == i]
        var = float((t["b"] ** 2 * t["v"]).sum())
        if method == "naive":   # the plug-in: v = sum over the cell of (r - mu)^2
            assert np.allclose(t["v"], t["c2"] - 2 * t["mu"] * t["c"] + t["mu"] ** 2 * t["m"])
        assert math.isclose(var, table.loc[i, "std_error"] ** 2, rel_tol=1e-9), (method, i)


def test_propagated_variance_equals_row_level():
    """The factored variance with the (heuristic) ADC's uncertainty, against the same delta method summed impression
    by impression in numpy: psi_t (the estimator's own term) + phi_t = beta (r_t - CTR) (the ADC's), whose own
    variance is beta^2 M s2 per (ad, position) with s2 the smoothed click variance of the ADC's delta interval."""
    day = _ranked_day(np.random.default_rng(6), n=3000)
    perm, clicks, K, n = day["perm"], day["clicks"], day["K"], len(day["perm"])
    oracle = np.argsort(-day["P"], axis=1)[:, :K][day["x"]]
    ap, fac, fsq = _tables(day, {"oracle": oracle, "rev": perm[:, ::-1]})
    table = A.adc_table(ap, methods=("heuristic",), bootstrap=False)
    C = A.adc_vector(table, "heuristic", K)
    # the ADC's per-impression influence, written from its formula: alpha_a / (M(a,i) D_i) at i, -C_i alpha_a /
    # (M(a,1) D_i) at 1, centred on the ad's CTR there
    M = np.zeros((day["n_ads"], K)); Cl = np.zeros_like(M)
    np.add.at(M, (perm, np.arange(K)[None, :].repeat(n, 0)), 1.0)
    np.add.at(Cl, (perm, np.arange(K)[None, :].repeat(n, 0)), clicks)
    ctr = np.where(M > 0, Cl / np.maximum(M, 1), 0.0)
    Tb = M.sum(1)
    est = FA.factored_estimate(fac["oracle"], fsq["oracle"], FA.ad_impressions(ap), C)
    g = P.gradient(lambda c: FA.factored_estimate(fac["oracle"], fsq["oracle"], FA.ad_impressions(ap), c)["value"], C)
    phi, beta = np.zeros((n, K)), np.zeros((day["n_ads"], K))
    for i in range(1, K):
        alpha = np.where((M[:, i] > 0) & (M[:, 0] > 0), M[:, i] * M[:, 0] / np.maximum(M[:, i] + M[:, 0], 1), 0.0)
        D = alpha @ ctr[:, 0]
        for k in (0, i):
            b = alpha / np.maximum(M[:, k], 1) / D * (1.0 if k == i else -C[i])
            a = perm[:, k]
            phi[:, k] += g[i + 1] * b[a] * (clicks[:, k] - ctr[a, k])
            beta[:, k] += g[i + 1] * b
    lam = 1.0                                    # adc_table's and influence's default smoothing
    pbar = Cl.sum(0) / M.sum(0)
    pt = (Cl + lam * pbar) / (M + lam)
    s2 = pt - pt * pt                            # clicks are 0/1: q~ = p~
    # factored: x = r C_j / C_i / T_a for impressions of ads the target shows, psi = x - mean over the ad
    j = np.zeros((n, K), dtype=int)
    for i in range(K):
        for jj in range(K):
            j[oracle[:, jj] == perm[:, i], i] = jj + 1
    C0 = np.concatenate([[0.0], C])
    x = clicks * C0[j] / C[None, :] / Tb[perm]
    psi = np.zeros_like(x)
    for a in range(day["n_ads"]):
        sel = perm == a
        psi[sel] = x[sel] - x[sel].mean()
    var_own = est["std_error"] ** 2
    got = P.factored_variance(fac["oracle"], fsq["oracle"], FA.ad_impressions(ap), C, var_own,
                              P.influence(ap, "heuristic"))
    ref = var_own + 2 * float((psi * phi).sum()) + float((beta ** 2 * M * s2).sum())
    assert math.isclose(got, ref, rel_tol=1e-6)
    assert abs(float((psi ** 2).sum()) / var_own - 1) < 0.01        # the estimator's own term, as it had it


@pytest.mark.slow
def test_default_adc_unbiased_on_ranker_logs():
    """Ranked logs placed by a ranker with 30% uniform exploration (the generator's 'history' logging: a context-free
    ranking of yesterday's popular ads): the default ADC method's daily estimates are unbiased within their stated
    error, and its daily intervals cover (the non-cross-fitted variance_optimal of before was biased low here)."""
    method = EvaluateOptions().adc_method
    rng = np.random.default_rng(11)
    est, se, truth = [], [], None
    for _ in range(60):
        day = _ranked_day(rng)
        ap, _, _ = _tables(day, {})
        t = A.adc_table(ap, methods=(method,), bootstrap=False).set_index("position")
        est.append(t["coefficient"].to_numpy()[1:])
        se.append(t["std_error"].to_numpy()[1:])
        truth = day["C"][1:]
    est, se = np.array(est), np.array(se)
    bias = est.mean(0) - truth
    assert np.all(np.abs(bias) <= 3 * np.sqrt((se ** 2).mean(0) / len(est))), (bias, se.mean(0))
    assert np.mean(np.abs(est - truth) <= Z95 * se) >= 0.88


# ---- daily estimates in the report ------------------------------------------------------------------------------
def test_report_plots_daily_estimates(tmp_path):
    """`evaluate --by-day` writes estimates_by_day beside estimates; the report reads it and plots each policy's
    one-day estimates with their intervals (a partition whose column is null all day is read alone)."""
    from scavenger.report.build import render_html
    from scavenger.report.inputs import load_inputs

    job = tmp_path / "ev"
    rows = [{"policy_id": p, "estimator": e, "value": 0.5, "std_error": 0.05, "ci_low": 0.4, "ci_high": 0.6,
             "interval_kind": "el", "identified": True, "n_events": 100, "reason": None}
            for p in ("a", "b") for e in ("slate_pi", "slate_ips")]
    (job / "estimates").mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(job / "estimates" / "part-0.parquet")
    for i, day in enumerate(("2026-01-01", "2026-01-02", "2026-01-03")):
        d = pd.DataFrame(rows).assign(value=0.5 + 0.01 * i)
        if i == 1:
            d["reason"] = "no interval: a reason"
        (job / "estimates_by_day" / f"dt={day}").mkdir(parents=True)
        d.to_parquet(job / "estimates_by_day" / f"dt={day}" / "part-0.parquet")
    inp = load_inputs(estimates=str(job))
    assert len(inp.by_day) == 12 and sorted(inp.by_day["dt"].unique()) == ["2026-01-01", "2026-01-02", "2026-01-03"]
    page = render_html(inp)
    daily = page[page.index('<section id="daily">'):]
    daily = daily[:daily.index("</section>")]
    assert daily.count("<img") == 2 and 'data-policy="a"' in daily and "2026-01-03" in daily


def test_adc_gradients_equal_central_differences():
    day = _ranked_day(np.random.default_rng(8), n=2000)
    perm, K = day["perm"], day["K"]
    ap, fac, fsq = _tables(day, {"rev": perm[:, ::-1]})
    C = A.adc_vector(A.adc_table(ap, methods=("heuristic",), bootstrap=False), "heuristic", K)
    T_a = FA.ad_impressions(ap)
    f, q = fac["rev"], fsq["rev"]
    num = P.gradient(lambda c: FA.factored_estimate(f, q, T_a, c)["value"], C)
    ana = P.ratio_gradient(f, C, 1.0 / f["ad_id"].map(T_a).to_numpy(float))
    for i in num:
        assert math.isclose(num[i], ana[i], rel_tol=1e-5, abs_tol=1e-9), i
