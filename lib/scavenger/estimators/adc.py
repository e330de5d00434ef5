"""Attention-decay coefficients (seed 001 section 4.3; MATH.md "Factoring assumption").

Pure numpy/pandas functions of the ``ad_position`` statistics table (impressions m = M(a,i), clicks c = C(a,i),
c2 = sum of squared slot rewards; optionally Poisson-bootstrap replicates m_boot, c_boot).

- naive:  Est(i) = [sum_a C(a,i) / sum_a M(a,i)] / [sum_a C(a,1) / sum_a M(a,1)]                 (sec. 4.3.1)
- alpha:  Est(i) = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1) over ads with M(a,i) > 0 and M(a,1) > 0
          uniform alpha_a = 1; heuristic alpha_a = M(a,i) M(a,1) / (M(a,i) + M(a,1));
          variance_optimal alpha_a = 2 M(a,i) M(a,1) / (M(a,i) s2(a,1) + M(a,1) s2(a,i))          (Theorem 6)
          with s2(a,j) = q~ - p~^2, p~ = (C + lam pbar_j)/(M + lam), q~ = (c2 + lam qbar_j)/(M + lam): the click
          variance smoothed toward the position's pooled mean (lam = ``smoothing`` pseudo-impressions), so that
          zero-click ads do not divide by zero.
- DCG reference: 1 / log_b(b + i - 1) (the paper's table convention; C_1 = 1).

Intervals. Delta method ("delta"): alpha treated as fixed, impressions independent, Var CTR(a,j) =
s2(a,j)/M(a,j) with the plug-in s2 = c2/M - CTR^2; for i > 1 the numerator and denominator use disjoint
impressions, so Var(N/D) = (Var N + R^2 Var D) / D^2. The naive estimator: Var(p_i/p_1) = R^2 (Var p_i/p_i^2 +
Var p_1/p_1^2) with pooled p_j. Bootstrap ("bootstrap"): the estimator (alpha refitted) on every Poisson(1)
replicate (weights per event, seeded from event_id); percentile interval, std_error = replicate std.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import norm

METHODS = ("naive", "uniform", "heuristic", "variance_optimal")
ADC_COLUMNS = ["position", "method", "coefficient", "std_error", "ci_low", "ci_high", "interval_kind", "ads_used",
               "impressions_used", "dcg", "level"]


def dcg(positions, base: float = 2.0) -> np.ndarray:
    """DCG reference C_i = 1 / log_b(b + i - 1) (MATH.md; seed 001 table)."""
    i = np.asarray(positions, dtype=float)
    return np.log(base) / np.log(base + i - 1.0)


def matrices(ad_position: pd.DataFrame):
    """(ads, positions, M, C, C2) with M[a, i-1] etc., summed over logging policies (and any other key)."""
    df = ad_position.groupby(["ad_id", "position"], sort=True)[["m", "c", "c2"]].sum().reset_index()
    ads = np.array(sorted(df["ad_id"].unique()))
    K = int(df["position"].max()) if len(df) else 0
    ai = np.searchsorted(ads, df["ad_id"].to_numpy())
    pi = df["position"].to_numpy(dtype=int) - 1
    out = []
    for col in ("m", "c", "c2"):
        mat = np.zeros((len(ads), K))
        np.add.at(mat, (ai, pi), df[col].to_numpy(dtype=float))
        out.append(mat)
    return ads, np.arange(1, K + 1), out[0], out[1], out[2]


def bootstrap_matrices(ad_position: pd.DataFrame, ads: np.ndarray, K: int):
    """Replicate matrices (B, ads, K) of m_boot and c_boot, or None when the table has no replicates."""
    if "m_boot" not in ad_position.columns or not len(ad_position):
        return None
    B = len(np.asarray(ad_position["m_boot"].iloc[0]))
    Mb, Cb = np.zeros((B, len(ads), K)), np.zeros((B, len(ads), K))
    ai = np.searchsorted(ads, ad_position["ad_id"].to_numpy())
    pi = ad_position["position"].to_numpy(dtype=int) - 1
    mb = np.vstack([np.asarray(v, dtype=float) for v in ad_position["m_boot"]])  # rows x B
    cb = np.vstack([np.asarray(v, dtype=float) for v in ad_position["c_boot"]])
    for b in range(B):
        np.add.at(Mb[b], (ai, pi), mb[:, b])
        np.add.at(Cb[b], (ai, pi), cb[:, b])
    return Mb, Cb


def _ctr(C, M):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(M > 0, C / np.where(M > 0, M, 1.0), 0.0)


def smoothed_variance(M, C, C2, smoothing: float = 1.0):
    """s2(a,j) = q~ - p~^2 with p~, q~ shrunk toward the position's pooled mean by ``smoothing`` pseudo-impressions."""
    Mtot = M.sum(axis=0)
    pbar = np.where(Mtot > 0, C.sum(axis=0) / np.where(Mtot > 0, Mtot, 1), 0.0)
    qbar = np.where(Mtot > 0, C2.sum(axis=0) / np.where(Mtot > 0, Mtot, 1), 0.0)
    p = (C + smoothing * pbar) / (M + smoothing)
    q = (C2 + smoothing * qbar) / (M + smoothing)
    return np.maximum(q - p * p, 1e-12)


def alpha_weights(method: str, M, C, C2, i: int, smoothing: float = 1.0) -> np.ndarray:
    """alpha_a for position index i (0-based) against position 1; 0 for ads not shown at both."""
    used = (M[:, i] > 0) & (M[:, 0] > 0)
    if method == "uniform":
        a = np.ones(M.shape[0])
    elif method == "heuristic":
        a = M[:, i] * M[:, 0] / np.where(used, M[:, i] + M[:, 0], 1.0)
    elif method == "variance_optimal":
        s2 = smoothed_variance(M, C, C2, smoothing)
        a = 2 * M[:, i] * M[:, 0] / np.where(used, M[:, i] * s2[:, 0] + M[:, 0] * s2[:, i], 1.0)
    else:
        raise ValueError(f"unknown ADC method {method!r}")
    return np.where(used, a, 0.0)


def _plugin_var(M, C, C2):
    """Var of CTR(a,j): (c2/M - CTR^2)/M (0 where M = 0)."""
    ctr = _ctr(C, M)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = np.where(M > 0, C2 / np.where(M > 0, M, 1.0) - ctr * ctr, 0.0)
        return np.where(M > 0, np.maximum(s2, 0.0) / np.where(M > 0, M, 1.0), 0.0)


def estimate_position(method: str, M, C, C2, i: int, smoothing: float = 1.0):
    """(coefficient, delta-method variance, ads_used, impressions_used) for 0-based position i."""
    if i == 0:
        used = M[:, 0] > 0
        return 1.0, 0.0, int(used.sum()), float(M[:, 0].sum())
    if method == "naive":
        m_i, m_1 = M[:, i].sum(), M[:, 0].sum()
        if m_i <= 0 or m_1 <= 0 or C[:, 0].sum() <= 0:
            return math.nan, math.nan, int((M[:, i] > 0).sum()), float(m_i + m_1)
        p_i, p_1 = C[:, i].sum() / m_i, C[:, 0].sum() / m_1
        v_i = max(C2[:, i].sum() / m_i - p_i * p_i, 0.0) / m_i
        v_1 = max(C2[:, 0].sum() / m_1 - p_1 * p_1, 0.0) / m_1
        R = p_i / p_1
        var = (v_i + R * R * v_1) / (p_1 * p_1)  # = R^2 (v_i/p_i^2 + v_1/p_1^2)
        return R, var, int((M[:, i] > 0).sum()), float(m_i + m_1)
    a = alpha_weights(method, M, C, C2, i, smoothing)
    used = a > 0
    ctr = _ctr(C, M)
    N, D = float(a @ ctr[:, i]), float(a @ ctr[:, 0])
    imps = float(M[used, i].sum() + M[used, 0].sum())
    if not used.any() or D <= 0:
        return math.nan, math.nan, int(used.sum()), imps
    v = _plugin_var(M, C, C2)
    R = N / D
    var = (float(a * a @ v[:, i]) + R * R * float(a * a @ v[:, 0])) / (D * D)
    return R, var, int(used.sum()), imps


def adc_table(ad_position: pd.DataFrame, methods=METHODS, level: float = 0.95, dcg_base: float = 2.0,
              smoothing: float = 1.0, bootstrap: bool = True) -> pd.DataFrame:
    """The ADC output table: one row per (position, method, interval_kind) with the DCG reference beside."""
    ads, positions, M, C, C2 = matrices(ad_position)
    K = len(positions)
    z = float(norm.ppf(0.5 + level / 2))
    boot = bootstrap_matrices(ad_position, ads, K) if bootstrap else None
    ref = dcg(positions, dcg_base)
    rows = []
    for method in methods:
        for i in range(K):
            coef, var, n_ads, imps = estimate_position(method, M, C, C2, i, smoothing)
            se = math.sqrt(var) if var == var else math.nan
            rows.append({"position": i + 1, "method": method, "coefficient": coef, "std_error": se,
                         "ci_low": coef - z * se, "ci_high": coef + z * se, "interval_kind": "delta",
                         "ads_used": n_ads, "impressions_used": imps, "dcg": ref[i], "level": level})
            if boot is not None:
                Mb, Cb = boot
                # replicate c2 for 0/1 (or any) rewards is not stored; the alpha fit uses c2 ~ c * (c2/c) ratio
                ratio = np.where(C > 0, C2 / np.where(C > 0, C, 1.0), 1.0)
                reps = np.array([estimate_position(method, Mb[b], Cb[b], Cb[b] * ratio, i, smoothing)[0]
                                 for b in range(Mb.shape[0])])
                reps = reps[np.isfinite(reps)]
                if reps.size:
                    lo, hi = np.quantile(reps, [0.5 - level / 2, 0.5 + level / 2])
                    bse = float(reps.std(ddof=1)) if reps.size > 1 else math.nan
                else:
                    lo = hi = bse = math.nan
                rows.append({"position": i + 1, "method": method, "coefficient": coef, "std_error": bse,
                             "ci_low": float(lo), "ci_high": float(hi), "interval_kind": "bootstrap",
                             "ads_used": n_ads, "impressions_used": imps, "dcg": ref[i], "level": level})
    return pd.DataFrame(rows, columns=ADC_COLUMNS)


def adc_vector(table: pd.DataFrame, method: str = "variance_optimal", K: int | None = None) -> np.ndarray:
    """C_1..C_K from an ADC table (first row per position of ``method``; position 1 is 1)."""
    sub = table[table["method"] == method].drop_duplicates("position").sort_values("position")
    if not len(sub):
        raise ValueError(f"ADC table has no rows for method {method!r}")
    K = int(sub["position"].max()) if K is None else K
    out = np.full(K, np.nan)
    for p, c in zip(sub["position"].astype(int), sub["coefficient"].astype(float)):
        if 1 <= p <= K:
            out[p - 1] = c
    out[0] = 1.0
    return out
