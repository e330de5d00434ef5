"""Target minus another target b of the decisions on the events both decide, from the pair moments
(statistics/sql/pairs_tables.py: sums of r^p v_i v_j, v = (1, Da, Db, Wa, Wb), D_k = Y_k - 1).

Per event d = x_a - x_b, each policy's term at its own estimator's weights (estimators/differences.py
fold_coefficients: PI, PI++ at the window's w, cross-fitted pi_beta per fold; IPS r W), written in the joint layout
(r, r Z, 1, Z) with Z = (Ya_1..K, Yb_1..K) (or (Wa, Wb) for IPS) and read off the pair Gram: value = mean(d), its
paired sample variance, the estimator's interval kind, and the confidence sequence over the blocks (each block's
weights fitted on each policy's own events of the blocks before). Events one of the two does not decide are left
out and counted (n_unused, unused_reasons).
"""
from __future__ import annotations

import math

import numpy as np

from . import confidence_sequences as CS
from .differences import RATIO_REASON, difference_row, fold_coefficients, interval, paired_moments
from .intervals import MIN_MATCHING, matching_reason
from .slate_sequences import TERMS, block_moments, slot_bounds

MISSING_TABLE = ("the pair statistics of the two policies were not computed (a run without --baseline naming this "
                 "policy stored these days: run again with --baseline)")


def _gram(row: dict, P: int) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """(elements, sum v v', sum r v v', sum r^2 v v') of one (block) row of the pair moments."""
    from ..statistics.sql.pairs_tables import elements

    names = elements(P)
    mats = [np.zeros((len(names), len(names))) for _ in range(3)]
    for p in range(3):
        for i, a in enumerate(names):
            for j in range(i, len(names)):
                v = row.get(f"s{p}_{a}_{names[j]}")
                v = 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                mats[p][i, j] = mats[p][j, i] = v
    return names, *mats


def _in_elements(c: np.ndarray, J: int, kind: str, K: int, names: list) -> tuple[np.ndarray, np.ndarray]:
    """The joint-layout coefficients c = (a0, a_1..J, b0, b_1..J) as coefficients on (r v, v): Y = 1 + D (PI
    family, Z = (Ya, Yb)), or Z = (Wa, Wb) as they are (IPS). Positions beyond the table's hold D = 0."""
    a0, a, b0, b = c[0], c[1:J + 1], c[J + 1], c[J + 2:]
    on_r, on_1 = np.zeros(len(names)), np.zeros(len(names))
    at = {n: i for i, n in enumerate(names)}
    if kind == "ips":
        on_r[at["c"]], on_1[at["c"]] = a0, b0
        on_r[at["wa"]], on_r[at["wb"]], on_1[at["wa"]], on_1[at["wb"]] = a[0], a[1], b[0], b[1]
        return on_r, on_1
    on_r[at["c"]], on_1[at["c"]] = a0 + a.sum(), b0 + b.sum()
    for side, off in (("a", 0), ("b", K)):
        for k in range(1, K + 1):
            if f"{side}{k}" in at:
                on_r[at[f"{side}{k}"]] = a[off + k - 1]
                on_1[at[f"{side}{k}"]] = b[off + k - 1]
    return on_r, on_1


def _sums(row: dict, P: int, c: np.ndarray, J: int, kind: str, K: int) -> tuple:
    """(n, sum d, sum d^2, the scale of sum d^2's terms: differences.paired_moments) of the term with joint
    coefficients ``c`` over one row of the pair moments."""
    names, G0, G1, G2 = _gram(row, P)
    on_r, on_1 = _in_elements(c, J, kind, K, names)
    e = np.zeros(len(names))
    e[0] = 1.0
    s = on_r @ G1 @ e + on_1 @ G0 @ e
    s2 = on_r @ G2 @ on_r + 2.0 * on_r @ G1 @ on_1 + on_1 @ G0 @ on_1
    ar, a1 = np.abs(on_r), np.abs(on_1)
    scale = ar @ np.abs(G2) @ ar + 2.0 * ar @ np.abs(G1) @ a1 + a1 @ np.abs(G0) @ a1
    return float(row.get("n") or 0.0), float(s), float(s2), float(scale)


def joint(ca: np.ndarray, cb: np.ndarray, K: int) -> np.ndarray:
    """x_a - x_b in the joint layout (r, r Za, r Zb, 1, Za, Zb) from each policy's (r, r Z, 1, Z) coefficients."""
    Ja = (len(ca) - 2) // 2
    return np.concatenate([[ca[0] - cb[0]], ca[1:Ja + 1], -cb[1:Ja + 1], [ca[Ja + 1] - cb[Ja + 1]], ca[Ja + 2:],
                           -cb[Ja + 2:]])


def _pair_rows(stats, policy_id: str, baseline: str):
    pm = stats.table("pair_moments")
    if not len(pm) or "baseline_id" not in pm.columns:
        return None
    return pm[(pm["policy_id"] == policy_id) & (pm["baseline_id"] == baseline)]


def minus_policy(stats, policy_id: str, baseline: str, name: str, options, prepared: dict, prepare) -> dict:
    """The row of ``name``: ``policy_id`` minus ``baseline`` (another target) on the events both decide;
    ``prepare(policy)``: the slate family's shared facts of a policy (slate_family._prepared, cached)."""
    from ..statistics.sql.pairs_tables import PAIR_POSITIONS

    level = options.level
    head = dict(policy_id=policy_id, baseline_id=baseline, estimator=name, level=level)
    rows = _pair_rows(stats, policy_id, baseline)
    if rows is None:
        return difference_row(**head, reason=MISSING_TABLE)
    if name not in TERMS:
        return difference_row(**head, reason=RATIO_REASON.replace("confidence sequence", "paired difference"))
    other = prepare(baseline)
    why = prepared["reason"] or (other["reason"] and f"the baseline {baseline}: {other['reason']}")
    if why:
        return difference_row(**head, reason=why)
    K, m_a, m_b = prepared["m"].K, prepared["m"], other["m"]
    if name == "slate_ips" and min(m_a.n_W_pos, m_b.n_W_pos) < MIN_MATCHING:
        who = policy_id if m_a.n_W_pos < MIN_MATCHING else f"the baseline {baseline}"
        return difference_row(**head, reason=f"{who}: {matching_reason(int(min(m_a.n_W_pos, m_b.n_W_pos)))}")
    if K > PAIR_POSITIONS:
        return difference_row(**head, reason=f"slates of {K} positions: the pair statistics hold at most "
                                             f"{PAIR_POSITIONS}")
    kind = TERMS[name][0]
    total = rows.drop(columns=[c for c in ("dt", "policy_id", "baseline_id") if c in rows.columns])
    by_fold = {int(f): g.drop(columns=["fold"]).sum(min_count=1).to_dict() for f, g in total.groupby("fold")}
    counts = {c: int(np.nansum([r.get(c) or 0 for r in by_fold.values()]))
              for c in ("n", "n_unpaired", "n_missing_propensity", "n_long")}
    unused = _unused(counts, baseline)
    if counts["n"] < 2:
        return difference_row(**head, n=counts["n"], reason="fewer than two events decided by both (with every "
                                                              "propensity logged)", **unused)
    ca, cb, crossfit = _window_coefficients(name, prepared, other, options)
    J = 2 if kind == "ips" else 2 * K
    parts = [_sums(by_fold[f], K, joint(ca[f], cb[f], K), J, kind, K) for f in sorted(by_fold)]
    parts = [p for p in parts if p[0] > 0]
    n, value, var_mean = paired_moments(parts if crossfit else [tuple(map(sum, zip(*parts)))])
    se, lo, hi, ci_kind, why = interval(name, value, var_mean, n, prepared["bounds"][1], level)
    cs = _sequence(stats, policy_id, baseline, name, options, prepared["bounds"], K, kind)
    return difference_row(**head, value=value, se=se, lo=lo, hi=hi, n=n, reason=why, cs=cs, interval_kind=ci_kind,
                          **unused)


def _unused(counts: dict, baseline: str) -> dict:
    parts = [(counts["n_unpaired"], f"not decided by the baseline {baseline}"),
             (counts["n_missing_propensity"], "missing propensity on a held slot"),
             (counts["n_long"], "holds a position beyond the pair statistics' positions")]
    n = sum(k for k, _ in parts)
    return {"n_unused": n, "unused_reasons": "; ".join(f"{why}: {k}" for k, why in parts if k) or None}


def _window_coefficients(name: str, a: dict, b: dict, options) -> tuple[dict, dict, bool]:
    """({fold: coefficients of the policy's term} of both policies at their window estimates' weights, whether
    some policy's weights differ by fold: cross-fitted pi_beta, whose variance is then per fold)."""
    out, crossfit = [], False
    for p in (a, b):
        if name == "slate_ips":
            c = np.array([0.0, 1.0, 0.0, 0.0])
            out.append({0: c, 1: c})
            continue
        fc = fold_coefficients(name, p["m"], p["folds"], options)
        crossfit |= len(fc) > 1
        out.append({0: fc[0][1], 1: fc[-1][1]})
    return out[0], out[1], crossfit


def _sequence(stats, policy_id: str, baseline: str, name: str, options, bounds, K: int, kind: str) -> dict:
    """The band of d over the blocks (day, fold) of the pair moments, each policy's weights fitted on its own
    events of the blocks before."""
    wmax, ymax, rmin, rmax = bounds
    coef = TERMS[name][1]
    per = {p: dict(options.cached(("cs_blocks", p), lambda p=p: block_moments(stats, p, options)))
           for p in (policy_id, baseline)}
    rows_out, before = [], {policy_id: None, baseline: None}
    J = 2 if kind == "ips" else 2 * K
    zmax = [wmax, wmax] if kind == "ips" else list(slot_bounds(ymax, K)) * 2
    for block, row in _pair_blocks(stats, policy_id, baseline):
        ca = np.array(coef(K, before[policy_id], options), dtype=float)
        cb = np.array(coef(K, before[baseline], options), dtype=float)
        c = joint(ca, cb, K)
        low, high = CS.box_range(c, J, rmin, rmax, zmax)
        n, s, s2, _ = _sums(row, K, c, J, kind, K)
        if n > 0:
            rows_out.append((n, s, s2, low, high))
        for p in (policy_id, baseline):
            m = per[p].get(block)
            if m is not None:
                before[p] = m if before[p] is None else before[p].add(m)
    return CS.columns(CS.Blocks.of(rows_out) if rows_out else None, options.level, rmin - rmax, rmax - rmin)


def _pair_blocks(stats, policy_id: str, baseline: str):
    """((day, fold), summed row) per block of the pair moments, oldest day first (as block_moments')."""
    per_day, dates = getattr(stats, "per_day", None) or {}, sorted(getattr(stats, "dates", []) or [])
    for d in dates:
        t = per_day.get(d, {}).get("pair_moments")
        if t is None or not len(t):
            continue
        t = t[(t["policy_id"] == policy_id) & (t["baseline_id"] == baseline)]
        for f, g in t.groupby("fold"):
            yield (d, int(f)), g.drop(columns=[c for c in ("dt", "policy_id", "baseline_id", "fold")
                                                  if c in g.columns]).sum(min_count=1).to_dict()
