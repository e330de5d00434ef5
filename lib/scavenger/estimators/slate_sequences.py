"""The per-event terms of the IPS/PI family as blocks of a confidence sequence (estimators/confidence_sequences.py):
each day's fold-0 and fold-1 slate moments, and each estimator's term as a quadratic form of them.

    slate_ips             x = r W                     basis (r, r W, 1, W), range from W in [0, wmax]
    slate_pi              x = r G, G = 1 - K + sum_k Y_k   basis (r, r Y_k, 1, Y_k) of slate_basis._basis
    slate_pi_plus_plus    x = r G - sum_k w_k (Y_k - 1), w_k = P'(1 - H/alpha_k) fitted on the blocks BEFORE
    slate_pi_beta         x = r G - sum_k beta_k (Y_k - 1), beta_k fitted on the blocks before
    minus logging         x - r (what the target earns beyond what the logs earned, on the same events)

PI++ and pi_beta weigh each block with weights fitted on the blocks before it (predictable: known before the block's
events), the first block with none (PI's term): the control variates Y_k - 1 have mean 0 at any fixed weights, so
every block's term has mean V, the PI estimand, and its sums are quadratic forms of that block's stored moments at
those weights. The window's own estimate keeps the weights fitted on the whole window (slate.pi_plus_plus); the
band is of the same estimand. Self-normalized estimators (SNIPS, wPI) are ratios: no band from these sums.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import confidence_sequences as CS
from .slate_basis import _basis, _coef, _dot, _quad, _rg_coef
from .slate_moments import SlateMoments, flat_columns
from .slate_weights import (_beta_coef, _overflowing_slots, beta_weights, estimated_alpha,
                            pi_plus_plus_weights)

RATIO_REASON = ("a self-normalized (ratio) estimator: its per-event terms are not those of a mean, so no "
                "anytime-valid confidence sequence is built from these sums (use slate_pi or slate_ips)")
NO_SEQUENCE = ("no confidence sequence for this estimator: it has no anytime-valid construction from the per-day "
               "sums (the IPS/PI family's do)")


def _frame_moments(frame: pd.DataFrame, K: int) -> dict:
    """{(policy, fold): slate moments} of a frame of slate moments in K positions (positions a day never held:
    Y_k = 1), summed over logging policies; a NaN sum beside events is +inf (0 x inf or inf - inf: weights beyond
    double precision), as slate_family.slate_moments reads it. Only the sums (a block's term needs no maximum:
    max_W and max_Y are 0 here)."""
    from ..statistics.moment_columns import fit_moments
    from ..statistics.tables import _is_max

    df = fit_moments(frame, K)
    cols = [c for c in df.columns if c not in ("dt", "policy_id", "logging_policy", "fold")
            and not _is_max("slate_moments", c)]
    arr = df[cols].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        arr = np.where(np.isnan(arr) & (df["n"].to_numpy(dtype=float) > 0)[:, None], np.inf, arr)
    sums = pd.DataFrame(np.nan_to_num(arr, nan=0.0, posinf=np.inf), columns=cols)
    sums = sums.groupby([df["policy_id"].to_numpy(), df["fold"].to_numpy(dtype=int)], sort=False).sum()
    maxima = {c: 0.0 for c in flat_columns(K) if c not in cols}
    return {(p, int(f)): SlateMoments.from_flat({**dict(zip(cols, row)), **maxima}, K)
            for (p, f), row in zip(sums.index, sums.to_numpy()) if row[cols.index("n")] > 0}


def block_moments(stats, policy_id: str, options=None) -> list:
    """[((day, fold), the policy's slate moments)] per block, in order: each day of the window (oldest first), fold
    0 then fold 1 (the pass's fair coin), in the window's K; blocks without events left out. Each day's moments are
    computed once a run (options.shared: the prefixes of running/ and the days of --by-day read the same days)."""
    from ..statistics.moment_columns import moments_k

    merged = stats.table("slate_moments")
    if not len(merged):
        return []
    K = moments_k(merged)
    per_day, dates = getattr(stats, "per_day", None), getattr(stats, "dates", None)
    if not (per_day and dates):          # no per-day tables: the window's two folds
        days = {None: _frame_moments(merged, K)}
    else:
        def day(d):
            t = per_day.get(d, {}).get("slate_moments")
            make = lambda: _frame_moments(t, K) if t is not None and len(t) else {}     # noqa: E731
            shared = getattr(options, "shared", None)
            return shared(("cs_day", d, K, id(t)), make) if shared is not None else make()
        days = {d: day(d) for d in sorted(dates)}
    return [((d, f), m) for d, by in days.items() for f in (0, 1) if (m := by.get((policy_id, f))) is not None]


def ips_basis(m: SlateMoments) -> tuple[np.ndarray, np.ndarray]:
    """Sum vector and Gram matrix of u = (r, r W, 1, W) (the layout of slate_basis._basis with one weight, W);
    sum r^2 W is s_r2W (NaN on moments without it: then only terms without both r and r W can be formed)."""
    r2w = float(getattr(m, "s_r2W", math.nan))
    S = np.array([[m.s_r2, r2w, m.s_r, m.s_rW],
                  [r2w, m.s_r2W2, m.s_rW, m.s_rW2],
                  [m.s_r, m.s_rW, m.n, m.s_W],
                  [m.s_rW, m.s_rW2, m.s_W, m.s_W2]], dtype=float)
    return np.array([m.s_r, m.s_rW, m.n, m.s_W], dtype=float), S


def pi_coef(K: int, prev, options=None) -> np.ndarray:
    return _rg_coef(K)


def pi_plus_plus_coef(K: int, prev: SlateMoments | None, options=None) -> np.ndarray:
    """r G - sum_k w_k (Y_k - 1) with w fitted on ``prev`` (the blocks before; none: PI's term)."""
    if prev is None or prev.n < 2:
        return _rg_coef(K)
    given = getattr(options, "prior_mean", None)
    P = float(given) if given is not None else prev.s_r / prev.n
    w, *_ = pi_plus_plus_weights(estimated_alpha(prev), P if math.isfinite(P) else 0.0)
    w = np.where(np.isfinite(w), w, 0.0)
    return _rg_coef(K) + _coef(K, b0=float(w.sum()), b=-w)


def pi_beta_coef(K: int, prev: SlateMoments | None, options=None) -> np.ndarray:
    """r G - sum_k beta_k (Y_k - 1) with beta fitted on ``prev`` (none: PI's term)."""
    if prev is None or prev.n < 2:
        return _rg_coef(K)
    beta = beta_weights(prev)
    beta = np.where(_overflowing_slots(prev) | ~np.isfinite(beta), 0.0, beta)
    return _beta_coef(K, beta)


def ips_coef(K: int, prev, options=None) -> np.ndarray:
    return np.array([0.0, 1.0, 0.0, 0.0])


def slot_bounds(ymax, K: int) -> np.ndarray:
    """The K positions' weight bounds 1/min mu_k: a position the bounds lack (moments of a batch's larger K: no row
    of the window holds it, Y_k = 1 there) bounded by 1."""
    y = np.asarray(ymax, dtype=float).reshape(-1)[:K]
    return np.concatenate([y, np.ones(K - len(y))])


TERMS = {"slate_ips": ("ips", ips_coef), "slate_pi": ("pi", pi_coef),
         "slate_pi_plus_plus": ("pi", pi_plus_plus_coef), "slate_pi_beta": ("pi", pi_beta_coef)}


def term_blocks(moments: list, name: str, bounds, options=None, minus_logging: bool = False, key=None
                ) -> CS.Blocks:
    """The blocks (n, sum x, sum x^2, range) of estimator ``name``'s per-event term x (minus r with
    ``minus_logging``) over ``moments`` (block_moments), each block's weights fitted on the blocks before. With
    ``key`` (the policy and the window's first block), a block's row is computed once a run for given bounds: a
    prefix window starting on the same day has the same blocks before it (running/, pipelines/running.py)."""
    kind, coef = TERMS[name]
    wmax, ymax, rmin, rmax = bounds
    shared = getattr(options, "shared", None) if key is not None else None
    sums: list = []          # the moments of the blocks before each block, added as the loop goes (or cached)

    def before(i):
        if i == 0:
            return None
        if shared is None:
            return sums[i - 1]
        b, m = moments[i - 1]
        return shared(("cs_cum", key, b, m.K), lambda: m if i == 1 else before(i - 1).add(m))

    limits = (float(wmax), tuple(np.asarray(ymax, dtype=float).ravel()), float(rmin), float(rmax))
    rows = []
    for i, (block, m) in enumerate(moments):
        if shared is None:
            sums.append(m if i == 0 else sums[-1].add(m))

        def row(i=i, m=m):
            c = np.array(coef(m.K, before(i), options), dtype=float)
            if minus_logging:
                c[0] -= 1.0
            mvec, S = ips_basis(m) if kind == "ips" else _basis(m)
            J, zmax = (1, [wmax]) if kind == "ips" else (m.K, slot_bounds(ymax, m.K))
            return (m.n, _dot(c, mvec), _quad(c, S, c), *CS.box_range(c, J, rmin, rmax, zmax))
        if shared is None:
            rows.append(row())
            continue
        rows.append(shared(("cs_term", key, name, minus_logging, block, m.K, limits), row))
    return CS.Blocks.of(rows)


def estimate_columns(stats, policy_id: str, name: str, options, bounds, minus_logging: bool = False) -> dict:
    """{cs_low, cs_high, cs_reason} of estimator ``name`` for one policy over the window (or the difference
    against what the logs earned, ``minus_logging``), at options.level."""
    if name not in TERMS:
        return {"cs_low": math.nan, "cs_high": math.nan,
                "cs_reason": RATIO_REASON if name in ("slate_snips", "slate_wpi") else NO_SEQUENCE}
    moments = options.cached(("cs_blocks", policy_id), lambda: block_moments(stats, policy_id, options))
    rmin, rmax = float(bounds[2]), float(bounds[3])
    lo, hi = (rmin - rmax, rmax - rmin) if minus_logging else (rmin, rmax)
    if name == "slate_ips" and minus_logging and any(not math.isfinite(getattr(m, "s_r2W", math.nan))
                                                     for _, m in moments):
        return CS.columns(None, options.level, lo, hi, "the stored days lack sum r^2 W (statistics before version "
                                                       "13): scan them again for IPS minus logging")
    key = (policy_id, moments[0][0]) if moments else None
    return CS.columns(term_blocks(moments, name, bounds, options, minus_logging, key), options.level, lo, hi)
