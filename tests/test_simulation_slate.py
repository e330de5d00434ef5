"""Seed 002 section 6: exact pattern sampler, theory checks, unbiasedness under stochastic logging, CLI."""
from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scavenger.estimators import slate as S
from scavenger.simulation import slate_figures
from scavenger.simulation import slate_sim as ss

# mapInPandas workers must run this interpreter (a default only; conftest/session may set it first).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

RTOL = 1e-9


def _all_slates(D):
    return np.array(list(itertools.product(*[range(d) for d in D])), dtype=np.int64)


@pytest.mark.parametrize("model,D", [("elementwise", (2, 3, 5)), ("pairwise", (2, 3, 5)),
                                     ("pairwise", (4, 2, 3, 2))])
def test_pattern_probs_and_means_are_exact(model, D):
    """P(m) and q(m) = E[p(A)|m] equal brute-force enumeration of every slate of the tensor."""
    t = ss.draw_tensor(np.random.default_rng(1), D, model, 0.25)
    A = _all_slates(D)
    match = (A == 0).astype(int)
    p = t.p(A)
    P = ss.patterns(len(D))
    probs, q = ss.pattern_probs(D), ss.pattern_means(t)
    for i, m in enumerate(P):
        sel = np.all(match == m, axis=1)
        np.testing.assert_allclose(probs[i], sel.mean(), rtol=RTOL)
        np.testing.assert_allclose(q[i], p[sel].mean(), rtol=RTOL)
    np.testing.assert_allclose(q[-1], p[0], rtol=RTOL)  # truth v = p(0,..,0)
    np.testing.assert_allclose(np.sum(probs * q), p.mean(), rtol=RTOL)


@pytest.mark.parametrize("model,D", [("elementwise", (3, 50, 800)), ("pairwise", (2, 7, 30, 5))])
def test_pattern_estimates_equal_slate_module(model, D):
    """Vectorized pattern-level estimators == estimators/slate.py on the same sufficient statistics."""
    rng = np.random.default_rng(5)
    t = ss.draw_tensor(rng, D, model, 0.25)
    counts, succ = ss.sample_patterns(rng, 200_000, ss.pattern_probs(D), ss.pattern_means(t), 6)
    est = ss.pattern_estimates(counts, succ, D, (0.25, 0.6))
    alpha = np.asarray(D, float) - 1
    for i in range(6):
        m = ss.moments_from_patterns(counts[i], succ[i], D)
        ref = {"ips": S.ips(m).value, "snips": S.snips(m).value, "pi": S.pi(m).value, "wpi": S.wpi(m).value,
               "pi_plus_plus@0": S.pi_plus_plus(m, 0.25, alpha).value,
               "pi_plus_plus@1": S.pi_plus_plus(m, 0.6, alpha).value,
               "pi_plus_plus_logged_prior": S.pi_plus_plus(m, None, alpha).value,
               "pi_plus_plus_estimated_alpha": S.pi_plus_plus(m, 0.25, None).value,
               "pi_beta": S.pi_beta(m).value}
        for name, value in ref.items():
            if np.isnan(value):
                assert np.isnan(est[name][i])
            else:
                np.testing.assert_allclose(est[name][i], value, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("model,D", [("elementwise", (2, 4, 6)), ("pairwise", (3, 2, 5))])
def test_exact_sampler_matches_row_by_row_sampler(model, D):
    """At N=2000 the estimator distribution of the exact sampler equals that of a row-by-row sampler:
    two-sample KS p > 0.001, means within 4 standard errors, variances within 4 standard errors of the ratio."""
    t = ss.draw_tensor(np.random.default_rng(11), D, model, 0.25)
    N, sims = 2000, 800
    priors = (0.25,)
    exact = ss.pattern_estimates(*ss.sample_patterns(np.random.default_rng(12), N, ss.pattern_probs(D),
                                                     ss.pattern_means(t), sims), D, priors)
    rows = ss.row_level_estimates(np.random.default_rng(13), t, N, sims, priors)
    for name in ("ips", "pi", "pi_plus_plus@0", "wpi", "pi_beta"):
        a, b = exact[name], rows[name]
        assert stats.ks_2samp(a, b).pvalue > 1e-3, name
        z = (a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / sims + b.var(ddof=1) / sims)
        assert abs(z) < 4, (name, z)
        # log variance ratio has sd ~ sqrt(2/(n-1) * (1 + kurtosis/2)) per sample; use the empirical kurtosis
        kurt = max(stats.kurtosis(a), stats.kurtosis(b), 0.0)
        sd = np.sqrt(2 * (2 / (sims - 1)) * (1 + kurt / 2))
        assert abs(np.log(a.var() / b.var())) < 4 * sd, (name, a.var(), b.var())


def test_simulated_nmse_matches_exact_risk():
    """Per tensor, N*MSE from 4000 exact simulations equals the exact N*MSE (eq. 7-11) within 4 SE."""
    cell = ss.Cell(0, 3, (3, 50, 800), "elementwise", 1_000_000, 0.25, (0.25,), 4000)
    for tensor_id in range(2):
        df = ss.simulate_tensor(cell, tensor_id, seed=3)
        for est in ("ips", "pi", "pi_plus_plus"):
            row = df[df["estimator"] == est].iloc[0]
            assert abs(row["nmse"] - row["nmse_exact"]) < 4 * row["nmse_se"], (est, row.to_dict())


def test_theory_delta_nmse_with_true_and_misspecified_prior():
    """D=[3,50,800], Pbar=0.25: measured delta_nmse = P'(2 Pbar - P') K (M - H) within Monte Carlo error
    (4 SE over 200 tensors x 200 sims, N=1e7); Pbar^2 K(M-H) at P'=Pbar; negative past P'=2 Pbar."""
    priors = (0.25, 0.10, 0.40, 0.50, 0.65, 0.80)
    cell = ss.Cell(0, 3, (3, 50, 800), "elementwise", 10_000_000, 0.25, priors, 200)
    per_tensor = ss.run_cells([cell], tensors=200, seed=0)
    summ = ss.summarize(per_tensor)
    pp = summ[summ["estimator"] == "pi_plus_plus"].set_index("prior")
    alpha = np.array([2.0, 49.0, 799.0])
    kmh = 3 * (alpha.mean() - 3 / np.sum(1 / alpha))
    for prior in priors:
        row = pp.loc[prior]
        theory = prior * (2 * 0.25 - prior) * kmh
        np.testing.assert_allclose(row["theory_delta"], theory, rtol=RTOL)
        assert row["delta_nmse_se"] < 0.1 * max(abs(theory), 52.0)  # the check has power
        assert abs(row["delta_nmse"] - theory) < 4 * row["delta_nmse_se"], (prior, row["delta_nmse"], theory)
    np.testing.assert_allclose(pp.loc[0.25, "theory_delta"], 0.25 ** 2 * kmh, rtol=RTOL)
    for prior in (0.65, 0.80):  # past 2 Pbar = 0.5: PI++ is worse than PI
        assert pp.loc[prior, "delta_nmse"] + 4 * pp.loc[prior, "delta_nmse_se"] < 0
    assert pp.loc[0.25, "delta_nmse"] - 4 * pp.loc[0.25, "delta_nmse_se"] > 0
    # the data-driven prior (logged mean reward) and estimated alpha behave like P' = Pbar
    for name in ("pi_plus_plus_logged_prior", "pi_plus_plus_estimated_alpha"):
        row = summ[summ["estimator"] == name].iloc[0]
        assert abs(row["delta_nmse"] - 0.25 ** 2 * kmh) < 4 * row["delta_nmse_se"], name


def test_equal_slot_sizes_pi_plus_plus_coincides_with_pi():
    """M = H for D=[10,10,10]: w = 0, PI++ = PI in every simulation, delta_nmse = 0 exactly."""
    cell = ss.Cell(0, 3, (10, 10, 10), "elementwise", 100_000, 0.25, (0.25, 0.4), 50)
    df = ss.simulate_tensor(cell, 0, seed=0)
    pp = df[df["estimator"] == "pi_plus_plus"]
    pi_row = df[df["estimator"] == "pi"].iloc[0]
    assert (pp["delta_nmse"] == 0).all() and (pp["theory_delta"] == 0).all()
    np.testing.assert_allclose(pp["nmse"], pi_row["nmse"], rtol=RTOL)
    assert pi_row["M"] == pi_row["H"] == 9.0


def test_unbiased_under_stochastic_logging_and_elementwise_reward():
    """Row-level numpy simulation, non-uniform factorized logging mu and stochastic factorized target pi,
    elementwise-additive Bernoulli rates: IPS, PI and PI++ (exact alpha, fixed prior) are unbiased (mean over
    2000 simulations within 4 SE of v = sum_k E_pi[phi_k]); PI's 95% CLT interval covers v 90-99% of the time."""
    rng = np.random.default_rng(2024)
    D = (3, 5, 8)
    K = len(D)
    mu = [rng.dirichlet(np.full(d, 3.0)) for d in D]
    pi_ = [rng.dirichlet(np.full(d, 0.7)) for d in D]
    phi = [rng.uniform(0.02, 0.9 / K, size=d) for d in D]
    v = sum(p @ f for p, f in zip(pi_, phi))
    alpha = np.array([S.alpha_exact(p, m) for p, m in zip(pi_, mu)])
    N, sims = 500, 2000
    est = {k: np.empty(sims) for k in ("ips", "pi", "pipp")}
    cover = 0
    for s in range(sims):
        A = np.column_stack([rng.choice(d, size=N, p=m) for d, m in zip(D, mu)])
        p = sum(phi[k][A[:, k]] for k in range(K))
        r = (rng.random(N) < p).astype(float)
        Y = np.column_stack([pi_[k][A[:, k]] / mu[k][A[:, k]] for k in range(K)])
        m = S.SlateMoments.from_arrays(r, Y)
        est["ips"][s] = S.ips(m).value
        e_pi = S.pi(m)
        est["pi"][s] = e_pi.value
        cover += e_pi.ci_low <= v <= e_pi.ci_high
        est["pipp"][s] = S.pi_plus_plus(m, prior_mean=0.3, alpha=alpha).value
    for name, x in est.items():
        z = (x.mean() - v) / (x.std(ddof=1) / np.sqrt(sims))
        assert abs(z) < 4, (name, x.mean(), v, z)
    assert 0.90 <= cover / sims <= 0.99, cover / sims


def test_spark_backend_equals_local(spark):
    cells = [ss.Cell(0, 2, (2, 30), "elementwise", 1_000_000, 0.25, (0.25,), 20),
             ss.Cell(1, 3, None, "pairwise", 1_000_000, 0.25, (0.25,), 20, group=1)]
    local = ss.run_cells(cells, tensors=3, seed=9)
    remote = ss.run_cells(cells, tensors=3, seed=9, spark=spark, partitions=2)
    pd.testing.assert_frame_equal(local, remote, check_dtype=False)


def test_cli_simulate_writes_tables_plot_and_result(tmp_path):
    from scavenger.cli import main

    out = tmp_path / "fig2"
    code = main(["simulate", "--preset", "fig2", "--tensors", "4", "--sims", "30", "--N", "1e6",
                 "--backend", "local", "--out", str(out)])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "ok" and result["counts"]["simulations"] == 16 * 4 * 30
    summary = pd.read_parquet(out / "fig2_summary.parquet")
    per_tensor = pd.read_parquet(out / "fig2_per_tensor.parquet")
    assert (out / "fig2.png").stat().st_size > 10_000
    n_priors = 1 + len(slate_figures.MISSPECIFIED)
    assert len(per_tensor) == 16 * 4 * (len(ss.SIM_ESTIMATORS) - 1 + n_priors)
    assert sorted(per_tensor.loc[per_tensor["estimator"] == "pi_plus_plus", "prior"].unique()) == \
        [0.125, 0.25, 0.375, 0.5, 0.625]
    # summary = mean over tensors of the per-tensor table
    head = summary[summary["estimator"] == "pi"]
    np.testing.assert_allclose(
        head.sort_values("cell_id")["nmse"].to_numpy(),
        per_tensor[per_tensor["estimator"] == "pi"].groupby("cell_id")["nmse"].mean().to_numpy(), rtol=RTOL)
    assert main(["simulate", "--preset", "fig2", "--N", "lots", "--out", str(tmp_path / "bad")]) == 2


@pytest.mark.parametrize("preset", slate_figures.PRESETS)
def test_presets_put_true_prior_first(preset):
    """The headline PI++ (and the estimated-alpha variant) use P' = Pbar in every preset cell."""
    cells = slate_figures.preset_cells(preset, sims=10, N_list=(1000,))
    assert cells and all(c.priors[0] == c.pbar for c in cells)
    if preset == "fig3":
        assert [c.D for c in cells if c.K == 4][0] == (2, 33, 66, 100)  # the paper's example
