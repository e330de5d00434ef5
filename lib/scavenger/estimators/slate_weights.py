"""The data-dependent weights of the slate control variates (MATH.md "Slate OPE"): alpha_k (estimated or exact),
PI++'s w_k = P'(1 - H/alpha_k) and its prior mean P', pi_beta's fitted beta_k, and the slots whose control-variate
sums overflow double precision (no weight is applied there). The estimators are in :mod:`.slate`."""
from __future__ import annotations

import math

import numpy as np

from .slate_basis import _basis, _coef, _quad, _rg_coef
from .slate_moments import SlateMoments

ALPHA_TOL = 1e-12


def _overflowing_slots(m: SlateMoments) -> np.ndarray:
    """Slots k whose control variate Y_k - 1 has a sum the PI-beta term needs beyond double precision (s_Y, s_rY,
    s_YY or s_rYY of k): no beta_k can be applied there."""
    with np.errstate(invalid="ignore"):
        sums = np.vstack([m.s_Y, m.s_rY, m.s_YY, m.s_rYY])
    return ~np.all(np.isfinite(sums), axis=0)


def estimated_alpha(m: SlateMoments) -> np.ndarray:
    """alpha_k = mean(Y_k^2) - 1 (seed 002 eq. 24, plug-in)."""
    if m.n <= 0:
        return np.full(m.K, np.nan)
    return np.diag(m.s_YY) / m.n - 1.0


def alpha_exact(pi_k: np.ndarray, mu_k: np.ndarray) -> float:
    """alpha_k = E_pi[Y_k] - 1 = sum_a pi_k(a)^2 / mu_k(a) - 1 for known slot distributions (seed 002 eq. 24)."""
    pi_k = np.asarray(pi_k, dtype=float)
    mu_k = np.asarray(mu_k, dtype=float)
    sup = pi_k > 0
    return float(np.sum(pi_k[sup] ** 2 / mu_k[sup]) - 1.0)


def pi_plus_plus_weights(alpha: np.ndarray, prior_mean: float, tol: float = ALPHA_TOL):
    """w_k = P'(1 - H/alpha_k) over the slots with alpha_k > tol (others get w_k = 0) (seed 002 eq. 39).

    Returns (w, used, M, H): used is the boolean mask of kept slots, M and H their arithmetic and harmonic
    means. With fewer than one kept slot M = H = nan and w = 0 (PI++ = PI).
    """
    alpha = np.asarray(alpha, dtype=float)
    used = np.isfinite(alpha) & (alpha > tol)
    w = np.zeros(alpha.shape)
    if used.sum() == 0:
        return w, used, float("nan"), float("nan")
    a = alpha[used]
    M = float(a.mean())
    H = float(len(a) / np.sum(1.0 / a)) if np.ptp(a) > 0 else M  # equal alphas: H = M exactly, w = 0
    w[used] = prior_mean * (1.0 - H / a)
    return w, used, M, H


def _prior(m: SlateMoments, prior_mean):
    if prior_mean is None:
        return (m.s_r / m.n if m.n > 0 else float("nan")), "logged_mean_reward"
    return float(prior_mean), "given"


def beta_weights(m: SlateMoments) -> np.ndarray:
    """beta_k = sum r G (Y_k - 1) / sum (Y_k - 1)^2 (follow-up paper; MATH.md); 0 where the denominator is 0 or
    either sum is not finite (the slot's weights overflow double precision: no control variate fitted there)."""
    mvec, S = _basis(m)
    K = m.K
    rg = _rg_coef(K)
    beta = np.zeros(K)
    for k in range(K):
        e = np.zeros(K)
        e[k] = 1.0
        z = _coef(K, b0=-1.0, b=e)  # Z_k = Y_k - 1
        den = _quad(z, S, z)
        if den > 0:
            b = _quad(rg, S, z) / den
            beta[k] = b if math.isfinite(b) else 0.0
    return beta


def _beta_coef(K: int, beta: np.ndarray) -> np.ndarray:
    """T = r G - sum_k beta_k (Y_k - 1)."""
    return _rg_coef(K) + _coef(K, b0=float(beta.sum()), b=-beta)

