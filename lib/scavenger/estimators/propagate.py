"""The ADC's uncertainty carried into the estimators that read it (factored, re-ordering): a joint delta method over
the impressions (issue 30; seed 001 sections 4.2-4.3 for the estimators).

An estimate that reads the ADC vector is V(C) = sum_t kappa_t x_t(C) over logged impressions t (ad a at position p,
reward r), x_t = r c_t / C_p with c_t the target's coefficient (factored.py, reordering.py). With C estimated from
the same impressions (``influence``: C_i_hat - C_i ~ sum_t b_i(t) (r_t - mu(t))) and g = dV/dC at C_hat:

    V_hat - V ~ sum_t psi_t + sum_t phi_t,   psi_t = kappa_a (x_t - rho r_t - xbar_a)   (the estimator's own term,
                                             whose sum of squares is its existing variance var_own)
                                             phi_t = beta (r_t - mu),  beta = sum_i g_i b_i  per (fold, ad, position)
    Var = var_own + 2 sum_t psi_t phi_t + sum_t phi_t^2, with
    sum phi^2     = sum_cells beta^2 v, v = sum (r - mu)^2 over the cell as the ADC's delta interval takes it
    sum psi phi   = sum_cells beta kappa_a [w (Sxr - mu Sx) - rho (c2 - mu c) - xbar_a (c - mu m)]

where Sx = sum x, Sxr = sum x r over the (ad, position)'s impressions (from the factored table's s_rp and s_r2p),
w = m_fold / m the fold's share of them (the factored table has no fold), and (kappa, rho, xbar) = (1/T_a, 0,
S_a/T_a) for factored, (1/n, 0, A/N) for the per-event re-ordering value, (1/B, lift, 0) for the lift A/B. Both
terms use only the per-day tables, so the interval needs no extra scan. The re-ordering estimates' own variance
var_own is over events (reordering.py, ``reorder_pairs``); the two ADC terms here still take each impression as a
unit (the within-event products psi_i phi_k, phi_i phi_k of different slots are left out).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .factored import _coef
from .slate_basis import _sq


def influence(ad_position: pd.DataFrame, method: str, smoothing: float = 1.0) -> pd.DataFrame:
    """The delta method's linearisation of C_i (i >= 2): an impression t of ad a at position p (1 or i) in fold f
    moves the estimate by b (r_t - mu): with cells c (ads; (fold, ad) when cross-fitted; one pooled cell for naive),
    C_i = N/D, N = sum_c alpha_c CTR(c,i), D = sum_c alpha_c CTR(c,1): b = alpha_c / (M(c,i) D) at i,
    b = -C_i alpha_c / (M(c,1) D) at 1, mu = the cell's CTR. Rows (fold, ad_id, position, target, b, mu, m, c, c2, v)
    with the fold cell's impressions m, clicks c, squared rewards c2 and v = Var of its sum of r - mu as the delta
    interval takes it (m s2, s2 smoothed; naive: the plug-in), so sum b^2 v is the delta variance of C_i
    (``propagated_variance`` reads them)."""
    cols = ["fold", "ad_id", "position", "target", "b", "mu", "m", "c", "c2", "v"]
    if not len(ad_position):
        return pd.DataFrame(columns=cols)
    from .attention_decay import _cells, _ctr, fold_matrices, matrices, smoothed_variance

    ads, positions, M, C, C2 = matrices(ad_position)
    K = len(positions)
    folds = fold_matrices(ad_position, ads, K)
    Mf, Cf, C2f = folds if folds is not None else (M[None], C[None], C2[None])
    nf, n = Mf.shape[0], len(ads)
    frames = []
    for i in range(1, K):
        if method == "naive":
            m_i, m_1, c_1 = M[:, i].sum(), M[:, 0].sum(), C[:, 0].sum()
            if m_i <= 0 or m_1 <= 0 or c_1 <= 0:
                continue
            p_i, p_1 = C[:, i].sum() / m_i, c_1 / m_1
            coef = {i: (np.full((nf, n), 1.0 / (m_i * p_1)), np.full((nf, n), p_i)),
                    0: (np.full((nf, n), -(p_i / p_1) / (m_1 * p_1)), np.full((nf, n), p_1))}
            s2 = None
        else:
            a, Mc, Cc, C2c = _cells(method, M, C, C2, i, smoothing, folds)
            ctr = _ctr(Cc, Mc)
            s2 = smoothed_variance(Mc, Cc, C2c, smoothing, None)   # the delta interval's s2: no floor
            D = float(a @ ctr[:, 0])
            if D <= 0 or not (a > 0).any():
                continue
            R = float(a @ ctr[:, i]) / D
            shape = (nf, n) if len(a) == nf * n else (1, n)
            with np.errstate(divide="ignore", invalid="ignore"):
                bi = np.where(a > 0, a / (Mc[:, i] * D), 0.0).reshape(shape)
                b1 = np.where(a > 0, -R * a / (Mc[:, 0] * D), 0.0).reshape(shape)
            coef = {i: (np.broadcast_to(bi, (nf, n)), np.broadcast_to(ctr[:, i].reshape(shape), (nf, n))),
                    0: (np.broadcast_to(b1, (nf, n)), np.broadcast_to(ctr[:, 0].reshape(shape), (nf, n)))}
        for p, (b, mu) in coef.items():
            m, c, c2 = Mf[:, :, p], Cf[:, :, p], C2f[:, :, p]
            v = c2 - 2 * mu * c + mu * mu * m if s2 is None else \
                m * np.broadcast_to(s2[:, p].reshape((nf, n) if len(s2) == nf * n else (1, n)), (nf, n))
            frames.append(pd.DataFrame({"fold": np.repeat(np.arange(nf), n), "ad_id": np.tile(ads, nf),
                                        "position": p + 1, "target": i + 1, "b": b.reshape(-1),
                                        "mu": mu.reshape(-1), "m": m.reshape(-1), "c": c.reshape(-1),
                                        "c2": c2.reshape(-1), "v": v.reshape(-1)}))
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    return out[(out["b"] != 0) & (out["m"] > 0)].reset_index(drop=True)[cols]


def gradient(value_fn, C: np.ndarray, h: float = 1e-6) -> dict:
    """{position i: dV/dC_i} for i >= 2, central differences of ``value_fn(C)``."""
    out = {}
    for i in range(1, len(C)):
        up, down = C.copy(), C.copy()
        up[i] += h
        down[i] -= h
        out[i + 1] = (value_fn(up) - value_fn(down)) / (2 * h)
    return out


def ratio_gradient(factored: pd.DataFrame, C: np.ndarray, weight) -> dict:
    """{i: dV/dC_i} for i >= 2 of V = sum over factored rows of w s_rp C_j / C_i (``weight`` w: a scalar or one per
    row): d/dC_m = sum w s_rp (1[j = m] / C_i - 1[i = m] C_j / C_i^2). Factored: w = 1/T_a; re-ordering: 1/n."""
    C = np.asarray(C, dtype=float)
    if not len(factored):
        return {i + 1: 0.0 for i in range(1, len(C))}
    i, j = factored["pos_i"].to_numpy(int), factored["pos_j"].to_numpy(int)
    ws = np.asarray(weight, dtype=float) * factored["s_rp"].to_numpy(float)
    ci, cj = _coef(C, i), _coef(C, j)
    # (1[j = m] - 1[i = m] C_j / C_i) / C_i: exactly 0 where i = j = m (C_j / C_i = 1 in floating point, where
    # 1/C_i - C_j/C_i^2 left an ulp: a target keeping the logged order got a lift interval [1, 1] of width 1e-17)
    return {m + 1: float(np.nansum(ws * ((j == m + 1) - (i == m + 1) * (cj / ci)) / ci)) for m in range(1, len(C))}


def impression_sums(factored: pd.DataFrame, C: np.ndarray) -> pd.DataFrame:
    """Per (ad_id, position): Sx = sum_j s_rp C_j / C_p and Sxr = sum_j s_r2p C_j / C_p (module docstring)."""
    if not len(factored):
        return pd.DataFrame(columns=["ad_id", "position", "sx", "sxr"])
    ratio = _coef(C, factored["pos_j"]) / _coef(C, factored["pos_i"])
    df = pd.DataFrame({"ad_id": factored["ad_id"].to_numpy(), "position": factored["pos_i"].to_numpy(int),
                       "sx": factored["s_rp"].to_numpy(float) * ratio,
                       "sxr": factored["s_r2p"].to_numpy(float) * ratio})
    return df.groupby(["ad_id", "position"], as_index=False)[["sx", "sxr"]].sum()


def propagated_variance(var_own: float, g: dict, infl: pd.DataFrame, sums: pd.DataFrame, kappa, xbar,
                        rho: float = 0.0) -> float:
    """var_own + 2 sum psi phi + sum phi^2 (module docstring). ``kappa`` and ``xbar``: scalars or Series by
    ad_id."""
    if infl is None or not len(infl) or not math.isfinite(var_own):
        return var_own
    d = infl.assign(gb=infl["b"].to_numpy(float) * infl["target"].map(g).fillna(0.0).to_numpy(float))
    cell = d.groupby(["fold", "ad_id", "position"], as_index=False).agg(
        beta=("gb", "sum"), mu=("mu", "first"), m=("m", "first"), c=("c", "first"), c2=("c2", "first"),
        v=("v", "first"))
    m_tot = cell.groupby(["ad_id", "position"])["m"].transform("sum")
    cell = cell.assign(share=cell["m"] / m_tot).merge(sums, on=["ad_id", "position"], how="left").fillna(
        {"sx": 0.0, "sxr": 0.0})
    ads = cell["ad_id"]
    k = ads.map(kappa).fillna(0.0) if isinstance(kappa, pd.Series) else float(kappa)
    xb = ads.map(xbar).fillna(0.0) if isinstance(xbar, pd.Series) else float(xbar)
    beta, mu, m, c, c2 = (cell[x].to_numpy(float) for x in ("beta", "mu", "m", "c", "c2"))
    var_c = float(np.sum(beta ** 2 * cell["v"].to_numpy(float)))
    cross = float(np.sum(beta * np.asarray(k, dtype=float) * (
        cell["share"].to_numpy(float) * (cell["sxr"].to_numpy(float) - mu * cell["sx"].to_numpy(float))
        - rho * (c2 - mu * c) - np.asarray(xb, dtype=float) * (c - mu * m))))
    return max(var_own + 2.0 * cross + var_c, 0.0)


def factored_variance(f_p, q_p, T_a: pd.Series, C: np.ndarray, var_own: float, infl, C_se=None,
                      weights: pd.Series | None = None) -> float:
    """Variance of the factored estimate with the ADC's uncertainty: kappa = w_a/T_a (factored.kappa; w_a = 1
    without eligibility strata), xbar = S_a/T_a; with a stored ADC (estimated elsewhere, independent)
    var_own + sum_i g_i^2 se_i^2."""
    from .factored import kappa, per_ad_sums

    k = kappa(T_a, weights)
    g = ratio_gradient(f_p, C, f_p["ad_id"].map(k).fillna(0.0).to_numpy(float) if len(f_p) else np.zeros(0))
    if infl is None:
        return _stored(var_own, g, C_se)
    S = per_ad_sums(f_p, q_p, C)["S"]
    T = T_a.reindex(S.index)
    return propagated_variance(var_own, g, infl, impression_sums(f_p, C), k, (S / T).fillna(0.0))


def reorder_variances(f_p, q_p, ap, C: np.ndarray, n_events: float, est: dict, infl, C_se=None
                      ) -> tuple[float, float]:
    """(variance of the per-event value A/n, of the lift A/B) with the ADC's uncertainty (module docstring)."""
    C = np.asarray(C, dtype=float)
    B = est["clicks"]
    g_v = ratio_gradient(f_p, C, 1.0 / n_events if n_events > 0 else 0.0)
    g_l = ratio_gradient(f_p, C, 1.0 / B if B else 0.0)
    var_v, var_l = _sq(est["std_error"]), _sq(est["lift_std_error"])     # inf, not OverflowError, beyond 1e154
    if infl is None:
        return _stored(var_v, g_v, C_se), _stored(var_l, g_l, C_se)
    sums = impression_sums(f_p, C)
    N = est["impressions"]
    v = propagated_variance(var_v, g_v, infl, sums, 1.0 / n_events, est["total"] / N if N else 0.0)
    lift = est["lift"] if math.isfinite(est["lift"]) else 0.0
    l_var = propagated_variance(var_l, g_l, infl, sums, 1.0 / B if B else 0.0, 0.0, rho=lift)
    return v, l_var


def _stored(var_own: float, g: dict, C_se) -> float:
    if C_se is None:
        return var_own
    se = np.nan_to_num(np.asarray(C_se, dtype=float))
    return var_own + float(sum(_sq(g[i]) * _sq(se[i - 1]) for i in g if i - 1 < len(se)))
