"""Paired differences of the IPS/PI family against a baseline on the same logged events: the target's
estimate minus the baseline's, with the interval of the paired per-event variance and its confidence sequence.

Against ``logging`` (what the logs themselves earned): per event d = x - r, x the estimator's term (r W for IPS,
r G - sum_k w_k Y_k for the PI family at the estimator's own weights), so d's sums are quadratic forms of the slate
moments: value = mean(d) = the estimate minus the logs' mean reward over the same events, s^2 the sample variance of
d (pi_beta: cross-fitted, per fold, as its estimate). IPS minus logging needs sum r^2 W (slate moments' s_r2W).
Against another target b of the decisions (estimators/pair_differences.py): d = x_a - x_b over the events both
decide, from the pair moments. Interval: the estimator's own kind over d (PI family: Student-t with the design's
effective sample size; IPS: CLT, the empirical likelihood's E[W] = 1 does not hold for a difference). The band:
estimators/slate_sequences.py over d's blocks (range [rmin - rmax, rmax - rmin]). Ratio estimators (SNIPS, wPI):
a row with the reason, no number.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from . import slate as S
from .intervals import MIN_MATCHING, clt_or_none, design_t_interval, matching_reason
from .slate_basis import _basis, _coef, _dot, _quad, _rg_coef
from .slate_sequences import RATIO_REASON, TERMS, estimate_columns, ips_basis
from .slate_weights import _beta_coef

LOGGING = "logging"
DIFFERENCE_COLUMNS = ("policy_id", "baseline_id", "estimator", "value", "std_error", "ci_low", "ci_high",
                      "interval_kind", "cs_low",
                      "cs_high", "level", "n_events", "n_unused", "unused_reasons", "reason", "cs_reason")
SUPPORTED = tuple(TERMS) + ("slate_snips", "slate_wpi")


def difference_row(policy_id, baseline_id, estimator, level, value=math.nan, se=math.nan, lo=math.nan, hi=math.nan,
                   n=0, reason=None, cs=None, **extra) -> dict:
    out = {c: None for c in DIFFERENCE_COLUMNS}
    out.update(policy_id=policy_id, baseline_id=baseline_id, estimator=estimator, value=value, std_error=se,
               ci_low=lo, ci_high=hi, interval_kind="none", level=level, n_events=int(n), reason=reason,
               cs_low=math.nan,
               cs_high=math.nan, n_unused=0)
    if cs:
        out.update(cs_low=cs.get("cs_low", math.nan), cs_high=cs.get("cs_high", math.nan),
                   cs_reason=cs.get("cs_reason"))
    out.update(extra)
    return out


def fold_coefficients(name: str, m, folds, options) -> list:
    """[(moments, coefficients of the estimator's per-event term in slate_basis._basis' layout)] as the window's
    estimate weighs them: one pair for PI and PI++ (w at the window's fit), one per fold for cross-fitted pi_beta."""
    K = m.K
    if name == "slate_pi":
        return [(m, _rg_coef(K))]
    if name == "slate_pi_plus_plus":
        w = np.asarray(S.pi_plus_plus(m, options.prior_mean, None, options.level).extra["weights"], dtype=float)
        return [(m, _rg_coef(K) + _coef(K, b=-w))]
    est = S.pi_beta(m, options.level, folds=folds)
    beta = est.extra.get("beta", [0.0] * K)
    if est.extra.get("crossfit"):
        return [(f, _beta_coef(K, np.asarray(b, dtype=float))) for f, b in zip(folds, beta)]
    return [(m, _beta_coef(K, np.asarray(beta, dtype=float)))]


ROUNDING = 1e-12    # a sum of squared deviations below this share of its terms' scale is rounding: d is constant


def paired_moments(parts) -> tuple[float, float, float]:
    """(n, value, s^2 / n) of d over [(n_f, sum d, sum d^2, scale)] parts (one: the sample variance of the mean;
    several folds: sum_f n_f s_f^2 / n^2, the cross-fitted form of slate.pi_beta). ``scale``: sum |d|^2's scale
    from the terms' absolute values (|c|' |S| |c|); a deviation sum below ROUNDING of it is 0 (two policies that
    agree on every event differ by rounding only, which must not read as variation)."""
    n = sum(p[0] for p in parts)
    value = sum(p[1] for p in parts) / n

    def dev(nf, s1, s2, scale):
        d = s2 - s1 * s1 / nf
        return 0.0 if d <= ROUNDING * scale else d

    if len(parts) == 1:
        nf, s1, s2, scale = parts[0]
        return n, value, dev(nf, s1, s2, scale) / (nf - 1) / nf if nf > 1 else math.nan
    var = sum(dev(*p) / (p[0] - 1) * p[0] for p in parts if p[0] > 1)
    return n, value, var / (n * n)


def scale_of(c: np.ndarray, S: np.ndarray) -> float:
    """|c|' |S| |c|: the size of the quadratic form's terms (the rounding of c' S c is a small share of it)."""
    a, G = np.abs(c), np.abs(S)
    with np.errstate(invalid="ignore", over="ignore"):
        return float(np.nan_to_num(a @ np.where(np.isnan(G), 0.0, G) @ a, posinf=np.inf))


def interval(name: str, value: float, var_mean: float, n: float, ymax, level: float):
    """(se, lo, hi, kind, why) of a difference: CLT for IPS's (the empirical likelihood's E[W] = 1 does not hold for
    a difference), the design's Student-t for the PI family's."""
    se = math.sqrt(max(var_mean, 0.0)) if math.isfinite(var_mean) else math.nan
    if name == "slate_ips":
        lo, hi, kind, why = clt_or_none(value, se, level)
    else:
        lo, hi, kind, why = design_t_interval(SimpleNamespace(value=value, std_error=se), SimpleNamespace(n=n),
                                              math.inf, ymax, 0.0, 1.0, level)
    return se, lo, hi, kind, why


def minus_logging(stats, policy_id: str, name: str, options, prepared: dict) -> dict:
    """The row of ``name`` for ``policy_id`` minus what the logs earned on the same events (``prepared``: the slate
    family's shared facts of the policy, slate_family._prepared)."""
    level = options.level
    base = dict(policy_id=policy_id, baseline_id=LOGGING, estimator=name, level=level)
    if name not in SUPPORTED:
        return difference_row(**base, reason=f"{name} gives no paired difference (the IPS/PI family does)")
    if prepared["reason"]:
        return difference_row(**base, n=prepared["n"], reason=prepared["reason"])
    if name in ("slate_snips", "slate_wpi"):
        return difference_row(**base, n=prepared["n"], reason=RATIO_REASON.replace("confidence sequence",
                                                                                      "paired difference"))
    m, unused = prepared["m"], prepared["unused"]
    if name == "slate_ips" and m.n_W_pos < MIN_MATCHING:
        return difference_row(**base, n=m.n, reason=matching_reason(int(m.n_W_pos)))
    if name == "slate_ips":
        if not math.isfinite(float(getattr(m, "s_r2W", math.nan))):
            return difference_row(**base, n=m.n, reason="the stored days lack sum r^2 W (statistics before "
                                                         "version 13): scan them again for IPS minus logging")
        mvec, G = ips_basis(m)
        c = np.array([-1.0, 1.0, 0.0, 0.0])
        parts = [(m.n, _dot(c, mvec), _quad(c, G, c), scale_of(c, G))]
    else:
        parts = []
        for fm, c in fold_coefficients(name, m, prepared["folds"], options):
            c = c.copy()
            c[0] -= 1.0
            mvec, G = _basis(fm)
            parts.append((fm.n, _dot(c, mvec), _quad(c, G, c), scale_of(c, G)))
    n, value, var_mean = paired_moments(parts)
    if not math.isfinite(value):
        return difference_row(**base, n=n, reason="the weights' sums overflow double precision (check e)")
    se, lo, hi, kind, why = interval(name, value, var_mean, n, prepared["bounds"][1], level)
    cs = estimate_columns(stats, policy_id, name, options, prepared["bounds"], minus_logging=True)
    return difference_row(**base, value=value, se=se, lo=lo, hi=hi, n=n, reason=why, cs=cs, interval_kind=kind, **{
        k: unused[k] for k in ("n_unused", "unused_reasons")})
