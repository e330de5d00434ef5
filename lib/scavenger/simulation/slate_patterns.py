"""The simulator's estimators from pattern counts (seed 002 section 6): with uniform logging and target (0,..,0) a
row enters every estimator only through its match pattern m (slate_model.py), so each estimator is a function of the
pattern counts n_m and reward sums s_m (:func:`pattern_estimates`); the row-level reference
(:func:`row_level_estimates`) samples every row and uses estimators/slate.py; :func:`exact_nmse` is the exact risk of
the fixed-weight linear estimators.
"""
from __future__ import annotations

import numpy as np

from ..estimators import slate as slate_est
from .slate_model import Tensor, patterns, sample_rows

# Estimators reported by the simulator (PI++ rows carry the prior P' they used in column ``prior``).
SIM_ESTIMATORS = ("ips", "snips", "pi", "wpi", "pi_plus_plus", "pi_plus_plus_logged_prior",
                  "pi_plus_plus_estimated_alpha", "pi_beta")


def _pattern_design(D):
    """Per-pattern Y (P, K), G (P,), W (P,) for uniform logging and target (0,..,0)."""
    D = np.asarray(D, dtype=float)
    M = patterns(len(D))
    Y = M * D
    G = 1.0 - len(D) + Y.sum(1)
    W = np.prod(Y, axis=1)
    return Y, G, W


def pipp_weights_exact(D, prior: float) -> np.ndarray:
    """PI++ weights with exact alpha_k = d_k - 1 (uniform logging, deterministic target; seed 002 eq. 24, 39)."""
    w, _, _, _ = slate_est.pi_plus_plus_weights(np.asarray(D, dtype=float) - 1.0, prior)
    return w


def pattern_estimates(counts: np.ndarray, succ: np.ndarray, D, priors) -> dict:
    """Every simulator estimator for S simulations given pattern counts n_m and reward sums s_m (both (S, P)).

    Returns {name: (S,) array} plus {"pi_plus_plus@<i>": ...} for each prior index i (fixed weights, exact
    alpha). Formulas as in :mod:`scavenger.estimators.slate` with sums over rows replaced by sums over patterns.
    """
    counts = np.asarray(counts, dtype=float)
    succ = np.asarray(succ, dtype=float)
    D = np.asarray(D, dtype=float)
    Y, G, W = _pattern_design(D)
    N = counts.sum(1)
    sum_rG = succ @ G
    sum_G = counts @ G
    sum_rW = succ @ W
    sum_W = counts @ W
    mean_Y = (counts @ Y) / N[:, None]
    out = {}
    out["ips"] = sum_rW / N
    with np.errstate(invalid="ignore", divide="ignore"):
        out["snips"] = np.where(sum_W > 0, sum_rW / np.where(sum_W > 0, sum_W, 1.0), np.nan)
        out["wpi"] = np.where(sum_G != 0, sum_rG / np.where(sum_G != 0, sum_G, 1.0), np.nan)
    pi_val = sum_rG / N
    out["pi"] = pi_val
    for i, prior in enumerate(priors):
        out[f"pi_plus_plus@{i}"] = pi_val - mean_Y @ pipp_weights_exact(D, prior)
    # P' = logged mean reward, exact alpha (w scales linearly in P')
    w1 = pipp_weights_exact(D, 1.0)
    out["pi_plus_plus_logged_prior"] = pi_val - (succ.sum(1) / N) * (mean_Y @ w1)
    # P' = first prior, alpha_k = mean(Y_k^2) - 1 estimated per simulation
    alpha_hat = (counts @ (Y * Y)) / N[:, None] - 1.0
    used = alpha_hat > slate_est.ALPHA_TOL
    inv = np.where(used, 1.0 / np.where(used, alpha_hat, 1.0), 0.0)
    n_used = used.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        H = np.where(n_used > 0, n_used / np.where(n_used > 0, inv.sum(1), 1.0), 0.0)
    w_hat = np.where(used, priors[0] * (1.0 - H[:, None] * inv), 0.0)
    out["pi_plus_plus_estimated_alpha"] = pi_val - np.sum(mean_Y * w_hat, axis=1)
    # data-driven beta_k = sum rG (Y_k - 1) / sum (Y_k - 1)^2
    Z = Y - 1.0
    num = succ @ (G[:, None] * Z)
    den = counts @ (Z * Z)
    beta = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    out["pi_beta"] = pi_val - np.sum(beta * (mean_Y - 1.0), axis=1)
    return out


def moments_from_patterns(counts: np.ndarray, succ: np.ndarray, D) -> slate_est.SlateMoments:
    """SlateMoments of one simulation from its pattern counts (binary rewards: r^2 = r)."""
    counts = np.asarray(counts, dtype=float)
    succ = np.asarray(succ, dtype=float)
    Y, G, W = _pattern_design(D)
    K = Y.shape[1]
    return slate_est.SlateMoments(
        K=K, n=counts.sum(), s_r=succ.sum(), s_r2=succ.sum(),
        s_Y=counts @ Y, s_rY=succ @ Y, s_r2Y=succ @ Y,
        s_YY=(Y * counts[:, None]).T @ Y, s_rYY=(Y * succ[:, None]).T @ Y, s_r2YY=(Y * succ[:, None]).T @ Y,
        s_W=counts @ W, s_rW=succ @ W, s_W2=counts @ (W * W), s_rW2=succ @ (W * W), s_r2W2=succ @ (W * W),
        n_W_pos=float(counts[W > 0].sum()), max_W=float(W[counts > 0].max()),
        max_Y=np.max(np.where(counts[:, None] > 0, Y, 0.0), axis=0), n_Y_pos=counts @ (Y > 0),
    )


def row_level_estimates(rng: np.random.Generator, tensor: Tensor, N: int, sims: int, priors) -> dict:
    """Same estimators as :func:`pattern_estimates` but by sampling every row and using estimators/slate.py."""
    D = np.asarray(tensor.D, dtype=float)
    out = {name: np.empty(sims) for name in ("ips", "snips", "pi", "wpi", "pi_plus_plus_logged_prior",
                                             "pi_plus_plus_estimated_alpha", "pi_beta")}
    for i in range(len(priors)):
        out[f"pi_plus_plus@{i}"] = np.empty(sims)
    alpha = D - 1.0
    for s in range(sims):
        r, Y, _ = sample_rows(rng, tensor, N)
        m = slate_est.SlateMoments.from_arrays(r, Y)
        out["ips"][s] = slate_est.ips(m).value
        out["snips"][s] = slate_est.snips(m).value
        out["pi"][s] = slate_est.pi(m).value
        out["wpi"][s] = slate_est.wpi(m).value
        for i, prior in enumerate(priors):
            out[f"pi_plus_plus@{i}"][s] = slate_est.pi_plus_plus(m, prior, alpha).value
        out["pi_plus_plus_logged_prior"][s] = slate_est.pi_plus_plus(m, None, alpha).value
        out["pi_plus_plus_estimated_alpha"][s] = slate_est.pi_plus_plus(m, priors[0], None).value
        out["pi_beta"][s] = slate_est.pi_beta(m).value
    return out


def exact_nmse(probs, q, a, b, N: int, v: float) -> float:
    """N*MSE of mean_t(r_t a(m_t) - b(m_t)): N bias^2 + Var(T), T = r a - b, r | m ~ Bernoulli(q(m)) (eq. 7-11)."""
    ET = np.sum(probs * (q * a - b))
    ET2 = np.sum(probs * (q * a * a - 2 * q * a * b + b * b))
    return float(N * (ET - v) ** 2 + (ET2 - ET ** 2))
