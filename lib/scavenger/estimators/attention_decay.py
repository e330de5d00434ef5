"""Attention-decay coefficients (seed 001 section 4.3; MATH.md "Factoring assumption").

Pure numpy/pandas functions of the ``ad_position`` statistics table (M(a,i) = m_r, the impressions whose slot
reward is known, clicks c = C(a,i), c2 = sum of squared slot rewards, both over those impressions: a null slot
reward beside a slate_reward is unknown, not a 0 click, see :func:`rewarded`; optionally Poisson-bootstrap
replicates m_boot, c_boot of m_r and c).

- naive:  Est(i) = [sum_a C(a,i) / sum_a M(a,i)] / [sum_a C(a,1) / sum_a M(a,1)]                 (sec. 4.3.1)
- alpha:  Est(i) = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1) over ads with M(a,i) > 0 and M(a,1) > 0
          uniform alpha_a = 1; heuristic alpha_a = M(a,i) M(a,1) / (M(a,i) + M(a,1));
          variance_optimal alpha_a = 2 M(a,i) M(a,1) / (M(a,i) s2(a,1) + M(a,1) s2(a,i))          (Theorem 6)
          with s2(a,j) = q~ - p~^2, p~ = (C + lam pbar_j)/(M + lam), q~ = (c2 + lam qbar_j)/(M + lam): the click
          variance smoothed toward the position's pooled mean (lam = ``smoothing`` pseudo-impressions), so that
          zero-click ads do not divide by zero. Cross-fitted (issue 30) when the table has the events' fold
          (a fair coin from the id hash): the cells are (fold, ad) and fold f's weights take fold f's impressions
          and fold 1-f's s2, so no weight is fitted on the clicks it weighs (fitted on the same clicks the weights
          favoured ads whose clicks came out low: biased, 77-82% coverage at positions 4-5 of a ranker's logs).
- DCG reference: 1 / log_b(b + i - 1) (the paper's table convention; C_1 = 1).

Intervals. Delta method ("delta"): alpha treated as fixed, impressions independent, Var CTR(a,j) =
s2(a,j)/M(a,j) with s2 the smoothed click variance above (the plug-in c2/M - CTR^2 is 0 for an ad without a click
and small exactly on the days its clicks came out few: on a ranker's logs, 30 impressions an ad at position 5, the
plug-in intervals covered 90.5% and missed high; smoothed by 10 pseudo-impressions 94%); for i > 1 the numerator and denominator use disjoint
impressions, so Var(N/D) = (Var N + R^2 Var D) / D^2. The naive estimator: Var(p_i/p_1) = R^2 (Var p_i/p_i^2 +
Var p_1/p_1^2) with pooled p_j. Bootstrap ("bootstrap"): the estimator (alpha refitted) on every Poisson(1)
replicate (weights per event, seeded from event_id); percentile interval, std_error = replicate std (the
replicates refit variance_optimal cross-fitted too). estimators/propagate.influence gives the delta method's
per-impression terms, which it carries into factored and re-ordering.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

METHODS = ("naive", "uniform", "heuristic", "variance_optimal")
SMOOTHING = 10.0   # the jobs' default pseudo-impressions of s2 (cross-fitted weights on ~50 impressions a cell)
S2_FLOOR = 1e-12   # the weights' least s2; the intervals' s2 is 0 below S2_FLOOR x the mean square (rounding)
ADC_COLUMNS = ["position", "method", "coefficient", "std_error", "ci_low", "ci_high", "interval_kind", "ads_used",
               "impressions_used", "dcg", "level"]


def dcg(positions, base: float = 2.0) -> np.ndarray:
    """DCG reference C_i = 1 / log_b(b + i - 1) (MATH.md; seed 001 table)."""
    i = np.asarray(positions, dtype=float)
    return np.log(base) / np.log(base + (i - 1.0))     # C_1 = 1 exactly, however close b is to 1


def rewarded(ad_position: pd.DataFrame) -> pd.DataFrame:
    """The table (ad_position or policy_ads) with m = m_r, the impressions whose slot reward is known: what a CTR
    C(a,i) / M(a,i) and the factored T_a divide by, as c and c2 sum those rewards only. A table without m_r (one
    made by hand): m."""
    return ad_position.assign(m=ad_position["m_r"]) if "m_r" in ad_position.columns else ad_position


def unknown_rewards(ad_position: pd.DataFrame) -> int:
    """Slot impressions whose reward is unknown (m - m_r): left out of the reward statistics."""
    if "m_r" not in ad_position.columns or not len(ad_position):
        return 0
    return int((ad_position["m"].astype(float) - ad_position["m_r"].astype(float)).sum())


def matrices(ad_position: pd.DataFrame):
    """(ads, positions, M, C, C2) with M[a, i-1] etc. (M: :func:`rewarded`), summed over logging policies (and any
    other key)."""
    df = rewarded(ad_position).groupby(["ad_id", "position"], sort=True)[["m", "c", "c2"]].sum().reset_index()
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


def bootstrap_matrices(ad_position: pd.DataFrame, ads: np.ndarray, K: int, by_fold: bool = False):
    """Replicate matrices (B, ads, K) of m_boot and c_boot -- (B, 2, ads, K) per fold with ``by_fold`` -- or None
    when the table has no replicates (or, by fold, no fold column)."""
    if "m_boot" not in ad_position.columns or not len(ad_position) or (by_fold and "fold" not in ad_position):
        return None
    B = len(np.asarray(ad_position["m_boot"].iloc[0]))
    shape = (B, 2, len(ads), K) if by_fold else (B, len(ads), K)
    Mb, Cb = np.zeros(shape), np.zeros(shape)
    ai = np.searchsorted(ads, ad_position["ad_id"].to_numpy())
    pi = ad_position["position"].to_numpy(dtype=int) - 1
    idx = (ad_position["fold"].to_numpy(dtype=int).clip(0, 1), ai, pi) if by_fold else (ai, pi)
    mb = np.vstack([np.asarray(v, dtype=float) for v in ad_position["m_boot"]])  # rows x B
    cb = np.vstack([np.asarray(v, dtype=float) for v in ad_position["c_boot"]])
    for b in range(B):
        np.add.at(Mb[b], idx, mb[:, b])
        np.add.at(Cb[b], idx, cb[:, b])
    return Mb, Cb


def _ctr(C, M):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(M > 0, C / np.where(M > 0, M, 1.0), 0.0)


def smoothed_variance(M, C, C2, smoothing: float = 1.0, floor: float | None = S2_FLOOR):
    """s2(a,j) = q~ - p~^2 with p~, q~ shrunk toward the position's pooled mean by ``smoothing`` pseudo-impressions,
    at least ``floor`` (the weights divide by it). ``floor=None``: the variance the intervals take, with no floor (0
    where s2 <= S2_FLOOR q~, rounding): a position whose rewards are all 0 or all 1 has pooled mean 0 or 1, so its
    smoothed s2 is 0 and only the floor gave its interval width (~1e-6, claiming certainty; see :func:`adc_table`)."""
    Mtot = M.sum(axis=0)
    pbar = np.where(Mtot > 0, C.sum(axis=0) / np.where(Mtot > 0, Mtot, 1), 0.0)
    qbar = np.where(Mtot > 0, C2.sum(axis=0) / np.where(Mtot > 0, Mtot, 1), 0.0)
    p = (C + smoothing * pbar) / (M + smoothing)
    q = (C2 + smoothing * qbar) / (M + smoothing)
    s2 = q - p * p
    return np.where(s2 > S2_FLOOR * q, s2, 0.0) if floor is None else np.maximum(s2, floor)


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


def fold_matrices(ad_position: pd.DataFrame, ads: np.ndarray, K: int):
    """(M, C, C2), each (2, ads, K): the matrices of each fold (the events' fair coin from their id hash,
    statistics/sql/logs.py), or None when the table has no fold column."""
    if "fold" not in ad_position.columns or not len(ad_position):
        return None
    ad_position = rewarded(ad_position)
    out = [np.zeros((2, len(ads), K)) for _ in range(3)]
    f = ad_position["fold"].to_numpy(dtype=int).clip(0, 1)
    ai = np.searchsorted(ads, ad_position["ad_id"].to_numpy())
    pi = ad_position["position"].to_numpy(dtype=int) - 1
    for mat, col in zip(out, ("m", "c", "c2")):
        np.add.at(mat, (f, ai, pi), ad_position[col].to_numpy(dtype=float))
    return tuple(out)


def crossfit_alpha(Mf, Cf, C2f, i: int, smoothing: float = 1.0) -> np.ndarray:
    """variance_optimal weights per (fold, ad), shape (2, ads): alpha^(f)_a = 2 M_f(a,i) M_f(a,1) /
    (M_f(a,i) s2_{1-f}(a,1) + M_f(a,1) s2_{1-f}(a,i)): fold f's impressions (no click in them), the other fold's
    smoothed click variances, so no weight is fitted on the clicks it weighs (cross-fitting by the fold column)."""
    out = np.zeros(Mf.shape[:2])
    for f in (0, 1):
        s2 = smoothed_variance(Mf[1 - f], Cf[1 - f], C2f[1 - f], smoothing)
        M = Mf[f]
        used = (M[:, i] > 0) & (M[:, 0] > 0)
        den = np.where(used, M[:, i] * s2[:, 0] + M[:, 0] * s2[:, i], 1.0)
        out[f] = np.where(used, 2 * M[:, i] * M[:, 0] / den, 0.0)
    return out


def _cells(method: str, M, C, C2, i: int, smoothing: float, folds=None):
    """(alpha, M, C, C2) over the cells the estimate sums: ads; (fold, ad) for cross-fitted variance_optimal."""
    if method == "variance_optimal" and folds is not None:
        Mf, Cf, C2f = folds
        a = crossfit_alpha(Mf, Cf, C2f, i, smoothing)
        K = M.shape[1]
        return a.reshape(-1), Mf.reshape(-1, K), Cf.reshape(-1, K), C2f.reshape(-1, K)
    return alpha_weights(method, M, C, C2, i, smoothing), M, C, C2


def estimate_position(method: str, M, C, C2, i: int, smoothing: float = 1.0, folds=None):
    """(coefficient, delta-method variance, ads_used, impressions_used) for 0-based position i; ``folds``
    (fold_matrices) cross-fits variance_optimal."""
    if i == 0:
        used = M[:, 0] > 0
        return 1.0, 0.0, int(used.sum()), float(M[:, 0].sum())
    if method == "naive":
        m_i, m_1 = M[:, i].sum(), M[:, 0].sum()
        if m_i <= 0 or m_1 <= 0 or C[:, 0].sum() <= 0:
            return math.nan, math.nan, int((M[:, i] > 0).sum()), float(m_i + m_1)
        p_i, p_1 = C[:, i].sum() / m_i, C[:, 0].sum() / m_1
        q_i, q_1 = C2[:, i].sum() / m_i, C2[:, 0].sum() / m_1       # s2 below rounding of the mean square: 0
        v_i = (q_i - p_i * p_i if q_i - p_i * p_i > S2_FLOOR * q_i else 0.0) / m_i
        v_1 = (q_1 - p_1 * p_1 if q_1 - p_1 * p_1 > S2_FLOOR * q_1 else 0.0) / m_1
        R = p_i / p_1
        var = (v_i + R * R * v_1) / (p_1 * p_1)  # = R^2 (v_i/p_i^2 + v_1/p_1^2)
        return R, var, int((M[:, i] > 0).sum()), float(m_i + m_1)
    n_ads = M.shape[0]
    a, M, C, C2 = _cells(method, M, C, C2, i, smoothing, folds)
    used = a > 0
    ctr = _ctr(C, M)
    N, D = float(a @ ctr[:, i]), float(a @ ctr[:, 0])
    imps = float(M[used, i].sum() + M[used, 0].sum())
    n_used = int(np.unique(np.nonzero(used)[0] % n_ads).size)
    if not used.any() or D <= 0:
        return math.nan, math.nan, n_used, imps
    with np.errstate(divide="ignore", invalid="ignore"):   # s2 smoothed as the weights' (see the module doc)
        v = np.where(M > 0, smoothed_variance(M, C, C2, smoothing, None) / np.where(M > 0, M, 1.0), 0.0)
    R = N / D
    D2 = D * D       # 0 for a tiny positive D (rewards near 1e-162 at position 1): divide by D twice, never by 0
    num = float(a * a @ v[:, i]) + R * R * float(a * a @ v[:, 0])
    var = num / D2 if D2 > 0 else num / D / D
    return R, var, n_used, imps


def _interval(i: int, lo: float, hi: float) -> tuple[float, float]:
    """(lo, hi), or no interval (NaN, NaN) of width 0 at a position i > 1 (0-based i > 0): the rewards there (and
    at 1, as the ratio weighs them) show no variation -- all 0 or all 1 -- so the variance is 0 and [C, C] would
    claim certainty (the rule of estimators/intervals.clt_or_none; estimators/adc_family.adc_rows says why). C_1 = 1 is the
    reference by definition, not an estimate: [1, 1]."""
    if i > 0 and math.isfinite(lo) and math.isfinite(hi) and not hi > lo:
        return math.nan, math.nan
    return lo, hi


def adc_table(ad_position: pd.DataFrame, methods=METHODS, level: float = 0.95, dcg_base: float = 2.0,
              smoothing: float = 1.0, bootstrap: bool = True) -> pd.DataFrame:
    """The ADC output table: one row per (position, method, interval_kind) with the DCG reference beside; a row
    whose interval would have width 0 has none (ci NaN, std_error 0: :func:`_interval`)."""
    ads, positions, M, C, C2 = matrices(ad_position)
    K = len(positions)
    folds = fold_matrices(ad_position, ads, K)
    from .distributions import normal_ppf

    z = normal_ppf(0.5 + level / 2)
    boot = bootstrap_matrices(ad_position, ads, K) if bootstrap else None
    fboot = bootstrap_matrices(ad_position, ads, K, by_fold=True) if boot is not None and folds is not None else None
    ref = dcg(positions, dcg_base)
    rows = []
    for method in methods:
        for i in range(K):
            coef, var, n_ads, imps = estimate_position(method, M, C, C2, i, smoothing, folds)
            se = math.sqrt(var) if var == var else math.nan
            lo, hi = _interval(i, coef - z * se, coef + z * se)
            rows.append({"position": i + 1, "method": method, "coefficient": coef, "std_error": se,
                         "ci_low": lo, "ci_high": hi, "interval_kind": "delta",
                         "ads_used": n_ads, "impressions_used": imps, "dcg": ref[i], "level": level})
            if boot is not None:
                Mb, Cb = boot
                # replicate c2 for 0/1 (or any) rewards is not stored; the alpha fit uses c2 ~ c * (c2/c) ratio
                ratio = np.where(C > 0, C2 / np.where(C > 0, C, 1.0), 1.0)
                fb = fboot if method == "variance_optimal" else None      # cross-fitted as above
                reps = np.array([estimate_position(method, Mb[b], Cb[b], Cb[b] * ratio, i, smoothing,
                                                   None if fb is None else (fb[0][b], fb[1][b], fb[1][b] * ratio))[0]
                                 for b in range(Mb.shape[0])])
                reps = reps[np.isfinite(reps)]
                if reps.size:
                    lo, hi = np.quantile(reps, [0.5 - level / 2, 0.5 + level / 2])
                    bse = float(reps.std(ddof=1)) if reps.size > 1 else math.nan
                    if i > 0 and not hi > lo:             # every replicate the same: no width, no interval
                        lo, hi, bse = math.nan, math.nan, 0.0
                else:
                    lo = hi = bse = math.nan
                rows.append({"position": i + 1, "method": method, "coefficient": coef, "std_error": bse,
                             "ci_low": float(lo), "ci_high": float(hi), "interval_kind": "bootstrap",
                             "ads_used": n_ads, "impressions_used": imps, "dcg": ref[i], "level": level})
    return pd.DataFrame(rows, columns=ADC_COLUMNS)


def adc_vector(table: pd.DataFrame, method: str = "variance_optimal", K: int | None = None) -> np.ndarray:
    """C_1..C_K from an ADC table (first row per position of ``method``; position 1 is 1). Values that are not
    numbers count as missing (NaN: the callers say the ADC is not identified); a table a user gave is checked
    first (:func:`.adc_table.check_adc_table`)."""
    sub = table[table["method"] == method]
    pos = pd.to_numeric(sub["position"], errors="coerce")
    sub = sub.assign(position=pos, coefficient=pd.to_numeric(sub["coefficient"], errors="coerce"))
    sub = sub[np.isfinite(pos) & (pos >= 1) & (pos == np.floor(pos))]
    sub = sub.drop_duplicates("position").sort_values("position")
    if not len(sub):
        raise ValueError(f"ADC table has no rows for method {method!r}")
    K = int(sub["position"].max()) if K is None else K
    out = np.full(K, np.nan)
    for p, c in zip(sub["position"].astype(int), sub["coefficient"].astype(float)):
        if 1 <= p <= K:
            out[p - 1] = c
    out[0] = 1.0
    return out


def ranker_positions(ad_position: pd.DataFrame, tol: float = 0.1) -> list[int]:
    """Positions i > 1 whose ad mix the logger chose differently from position 1's (a ranker puts other ads there):
    some ad's mean logged propensity at i differs from its mean at 1 by more than ``tol`` relative. There the naive
    ratio compares different ads' click rates and is confounded (seed 001 section 4.3.1)."""
    if not len(ad_position) or "sum_p" not in ad_position.columns:
        return []
    g = ad_position.groupby(["ad_id", "position"])[["sum_p", "n_p"]].sum()
    g = g[g["n_p"] > 0]
    p = (g["sum_p"] / g["n_p"]).unstack("position")
    if 1 not in p.columns:
        return []
    out = []
    for i in p.columns:
        both = p[[1, i]].dropna()
        if i > 1 and len(both) and float((abs(both[i] - both[1]) / both.max(axis=1)).max()) > tol:
            out.append(int(i))
    return out
