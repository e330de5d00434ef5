"""The ranking family's confidence sequences (the construction and its validity argument are those of
estimators/confidence_sequences.py): IIPS, RIPS and Cascade-DR are plain means over the decided events of a
per-event term with a known range, whose per-(day, fold) sums n, sum x, sum x^2 the ranking tables already hold
(k = 0 rows: s_ti, s_ti2 / s_tr, s_tr2 of ranking_sums; s_d, s_d2 of ranking_dr).

    slate_iips        x = T^I = sum_k u_k y_k r_k       in [sum_k ymax_k min(r_lo, 0), sum_k ymax_k max(r_hi, 0)]
    slate_rips        x = T^R = sum_k g_k V_k r_k       the same with V_k's bound prod_{j<=k} ymax_j
    slate_cascade_dr  x = D = sum_k d_k,  d_k = V_k (r_k - q_k(a_k)) + V_{k-1} E_pi q_k, q_k in (K - k + 1) x
                      [r_lo, r_hi]: d_k in [w_k r_lo - w_k q_hi + w'_k q_lo, w_k r_hi - w_k q_lo + w'_k q_hi]
                      (w_k, w'_k the bounds of V_k, V_{k-1}; r_lo = min(r_min, 0), r_hi = max(r_max, 0))

The box is the design's (the window's smallest logged propensity per position, as the intervals' phantoms, and the
declared slot reward range), with the caveat of confidence_sequences.py. IIPS and RIPS weigh each event by fixed
functions of its own slots, so the blocks are each day's fold 0, then fold 1, as for the slate family. Cascade-DR's
model q is cross-fitted within the day (ranking_sums.reward_model: fold f's terms use fold 1 - f's model), so a
day's fold-0 block is not predictable from the blocks before it (its terms depend on fold 1's events). Each fold
alone is: given the days before and the other fold of day d, fold f's events of day d are independent draws whose
term has mean V (q is fixed by the other fold). So two sequences, one over each fold's blocks (one a day), each at
level 1 - alpha/2, and their intersection holds V on every day with probability >= level (a union bound over the
two); each side uses half the events, so the band is about sqrt(2) wider than one over every event would be.
The self-normalized forms are ratios: no sequence. No sequence either where rows hold slots beyond the pass's wide
positions (n_beyond: their terms' range is not known).
"""
from __future__ import annotations

import math

import numpy as np

from . import confidence_sequences as CS
from .ranking import _vmax

TERMS = {"slate_iips": ("ranking_sums", "s_ti", "s_ti2"), "slate_rips": ("ranking_sums", "s_tr", "s_tr2"),
         "slate_cascade_dr": ("ranking_dr", "s_d", "s_d2")}
RATIO_REASON = ("a self-normalized (ratio) estimator: its per-event terms are not those of a mean, so no anytime-valid "
                "confidence sequence is built from these sums (use slate_iips or slate_rips)")


def _day_totals(table, name: str) -> dict:
    """{(policy, fold): (n, sum x, sum x^2, n_beyond)} of estimator ``name``'s term over one table of sums (the k = 0
    rows of a day's, or of the window's, ranking table), summed over logging policies."""
    _, s, s2 = TERMS[name]
    if table is None or not len(table) or s not in table.columns:
        return {}
    top = table[(table["k"] == 0) & ((table["l"] == 0) if "l" in table.columns else True)]
    cols = ["n", s, s2] + (["n_beyond"] if "n_beyond" in top.columns else [])
    g = top.groupby(["policy_id", "fold"], sort=False)[cols].sum()
    return {(p, int(f)): (*(float(v) for v in row[:3]), float(row[3]) if len(row) > 3 else 0.0)
            for (p, f), row in zip(g.index, g.to_numpy(dtype=float))}


def blocks(stats, policy_id: str, name: str, options=None) -> list:
    """[((day, fold), (n, sum x, sum x^2, n_beyond))] of the policy's term, each day of the window (oldest first)
    fold 0 then fold 1; the window's two folds where the statistics hold no per-day tables. Each day's totals are
    computed once a run (options.shared: the prefixes of running/ and the days of --by-day read the same days)."""
    table = TERMS[name][0]
    per_day, dates = getattr(stats, "per_day", None), getattr(stats, "dates", None)
    if not (per_day and dates):
        days = {None: _day_totals(stats.table(table), name)}
    else:
        shared = getattr(options, "shared", None)

        def day(d):
            t = per_day.get(d, {}).get(table)
            make = lambda: _day_totals(t, name)      # noqa: E731
            return shared(("ranking_cs_day", d, name, id(t)), make) if shared is not None else make()
        days = {d: day(d) for d in sorted(dates)}
    return [((d, f), v) for d, by in days.items() for f in (0, 1) if (v := by.get((policy_id, f))) and v[0] > 0]


def term_range(name: str, ymax, K: int, reward_bounds) -> tuple[float, float]:
    """(low, high) of the per-event term (module docstring) for K positions with weight bounds ``ymax``."""
    lo_r, hi_r = min(float(reward_bounds[0]), 0.0), max(float(reward_bounds[1]), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "slate_iips":
            v = _vmax("i", ymax, K)
            return float(v.sum() * lo_r), float(v.sum() * hi_r)
        v = _vmax("r", ymax, K)
        if name == "slate_rips":
            return float(v.sum() * lo_r), float(v.sum() * hi_r)
        vp = np.concatenate([[1.0], v[:-1]])
        togo = K - np.arange(1, K + 1) + 1.0               # q_k: a sum of K - k + 1 slot rewards
        q_lo, q_hi = togo * lo_r, togo * hi_r
        return float((v * lo_r - v * q_hi + vp * q_lo).sum()), float((v * hi_r - v * q_lo + vp * q_hi).sum())


def _as_blocks(rows, low: float, high: float) -> CS.Blocks:
    return CS.Blocks.of([(n, s, s2, low, high) for _, (n, s, s2, _) in rows])


def _short(x: dict) -> bool:
    """A null band only for want of events (it would exclude no value yet): as good as the whole range."""
    why = x["cs_reason"] or ""
    return why.startswith("too few events") or why.startswith("fewer than two events")


def _intersect(a: dict, b: dict, lo: float, hi: float) -> dict:
    """The intersection of two bands at level 1 - alpha/2 each (a band null for want of events: the whole range
    [lo, hi]; one null for any other reason, beyond double precision or empty, makes the intersection null too)."""
    for x in (a, b):
        if x["cs_reason"] and not _short(x):
            return x
    live = [x for x in (a, b) if not x["cs_reason"]]
    if not live:
        return a
    low, high = max(x["cs_low"] for x in live), min(x["cs_high"] for x in live)
    if low > high:
        return {"cs_low": math.nan, "cs_high": math.nan,
                "cs_reason": f"the confidence sequence is empty ([{low:.4g}, {high:.4g}]): the events contradict the "
                             f"range the weights and rewards were assumed to have (checks a, e)"}
    return {"cs_low": low, "cs_high": high, "cs_reason": None}


def estimate_columns(stats, policy_id: str, name: str, options, ymax, K: int, reward_bounds) -> dict:
    """{cs_low, cs_high, cs_reason} of ranking estimator ``name`` for one policy over the window, at options.level
    (``ymax``, ``K``: the window's slot weight bounds and positions, as the estimate's interval takes them)."""
    nan = math.nan
    if name not in TERMS:
        return {"cs_low": nan, "cs_high": nan, "cs_reason": RATIO_REASON}
    rows = blocks(stats, policy_id, name, options)
    if any(v[3] > 0 for _, v in rows):
        return {"cs_low": nan, "cs_high": nan,
                "cs_reason": "rows hold slots beyond the pass's wide positions: their terms' range is not known, so "
                             "no confidence sequence"}
    lo, hi = K * min(float(reward_bounds[0]), 0.0), K * max(float(reward_bounds[1]), 0.0)
    low, high = term_range(name, ymax, K, reward_bounds)
    level = options.level
    if name != "slate_cascade_dr":
        return CS.columns(_as_blocks(rows, low, high) if rows else None, level, lo, hi)
    half = 1.0 - (1.0 - level) / 2.0
    each = [CS.columns(_as_blocks(part, low, high) if part else None, half, lo, hi)
            for part in ([r for r in rows if r[0][1] == f] for f in (0, 1))]
    return _intersect(*each, lo, hi)
