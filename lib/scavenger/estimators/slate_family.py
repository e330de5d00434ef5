"""The slate family (seed 002): IPS, SNIPS, PI, wPI, PI++ and pi_beta of a policy from its slate moments, with the
empirical-likelihood intervals of estimators/intervals.py; not identified without logged propensities."""
from __future__ import annotations

import math

import numpy as np

from ..statistics.tables import _is_max, moments_k
from .rows import (Context, not_identified, pair_support, reorder_reason, reorders_logged_slate, row,
                     short_events, short_reason, slot_weight_bounds, weight_and_reward_bounds)


def slate_moments(stats, policy_id: str, fold: int | None = None):
    """SlateMoments of a policy over the window (summed over logging policies and folds, or one fold)."""
    from .slate_moments import SlateMoments

    sm = stats.table("slate_moments")
    if not len(sm):
        return None
    rows = sm[sm["policy_id"] == policy_id]
    if fold is not None:
        rows = rows[rows["fold"] == fold]
    if not len(rows):
        return None
    K = moments_k(rows)
    vals = rows.drop(columns=[c for c in ("dt", "policy_id", "logging_policy", "fold") if c in rows.columns])
    arr = vals.to_numpy(dtype=float)
    if "n" in vals.columns:   # NaN beside events (n > 0) is 0 * inf or inf - inf, not an empty sum: weights beyond
        with np.errstate(invalid="ignore"):                   # double precision, which must not sum away as 0
            arr = np.where(np.isnan(arr) & (vals["n"].to_numpy(dtype=float) > 0)[:, None], np.inf, arr)
    is_max = np.array([_is_max("slate_moments", c) for c in vals.columns])
    with np.errstate(invalid="ignore"):
        top = np.where(np.isnan(arr), -np.inf, arr).max(axis=0)
    total = np.where(is_max, np.where(top > -np.inf, top, np.nan), np.nansum(arr, axis=0))
    return SlateMoments.from_flat(dict(zip(vals.columns, total.tolist())), K)


def slate_rows(stats, policy_id: str, wanted: list, ctx: Context) -> list[dict]:
    """IPS, SNIPS, PI, wPI, PI++ and pi_beta of one policy; not identified without logged propensities."""
    from . import slate as S
    from .intervals import slate_interval

    opts = ctx.options
    m = slate_moments(stats, policy_id)
    pe = stats.table("policy_events")
    n_all = int(pe.loc[pe["policy_id"] == policy_id, "n_events"].sum()) if len(pe) else 0
    missing = int(m.n_missing_propensity) if m is not None else n_all
    unused = {"n_unused": missing, "n_missing_propensity": missing,
              "unused_reasons": f"missing propensity on a held slot: {missing}" if missing else None}
    if m is None or m.n <= 1:
        n = 0 if m is None else int(m.n)
        reason = too_few_events_reason(n, missing, n_all)
        return [not_identified(policy_id, e, reason, n, opts.level, **unused) for e in wanted]
    short = short_events(stats, policy_id)
    if short:
        # pi_k(a_k | x) = 0 at an empty position makes Y_k = 0 and G = 1 - K + sum_k Y_k < 0: no value of the target
        reason = short_reason(short, n_all, "the importance weights Y_k = pi_k/mu_k")
        return [not_identified(policy_id, e, reason, int(m.n), opts.level, **unused) for e in wanted]
    if reorders_logged_slate(stats, policy_id) and np.any(slot_weight_bounds(stats) > 1.0):
        # pi_k(a_k | x) is 1 for the logged ad because it was logged: E_mu[Y_k] = 1 fails (a logger of
        # propensity 1 everywhere drew nothing at random, and its re-ordering is a function of the context)
        reason = reorder_reason("the importance weights Y_k = pi_k/mu_k (E_mu[Y_k] = 1 needs a target that "
                                "does not see the logged ad)")
        return [not_identified(policy_id, e, reason, int(m.n), opts.level, **unused) for e in wanted]
    folds = (slate_moments(stats, policy_id, 0), slate_moments(stats, policy_id, 1))
    bounds = weight_and_reward_bounds(stats, getattr(opts, "reward_bounds", None))
    out = []
    # the target's mass on (position, ad) pairs the logs show (check c's measure); the share of events whose
    # logged slate matches the target's (W > 0) is the diagnostics' share_W_nonzero, not a support: it was given
    # here before, so a fully supported target of a uniform logger over 12 slates read 8% supported
    supported = pair_support(stats, policy_id)
    for e in wanted:
        est = _slate_one(S, e, m, opts, folds)
        extra = dict(unused)
        if math.isfinite(supported):
            extra.update(supported_share=supported, unsupported_share=1.0 - supported)
        ident = getattr(est, "identified", True)
        lo, hi, kind, reason = slate_interval(e, est, m, *bounds, opts.level)
        if not ident:           # the weights overflow double precision (estimators/slate_basis.py): say why
            reason = est.reason
        if e in ("slate_ips", "slate_snips") and m.n_W_pos == 0:
            ident, reason = False, ("no logged slate matches the target's (W = 0 on every event): "
                                    "IPS has no matching event to average")
        out.append(row(policy_id, e, est.value, est.std_error, lo, hi, kind,
                       est.n_events, opts.level, identified=ident, reason=reason,
                       prior_mean=est.extra.get("prior_mean"), prior_source=est.extra.get("prior_source"),
                       **extra))
    ctx.diagnostics.extend(S.diagnostics_frame(m, policy_id, opts.prior_mean).to_dict("records"))
    return out


def too_few_events_reason(n: int, missing: int, n_all: int) -> str:
    """Why the IPS/PI family is not identified with ``n`` <= 1 events logging every propensity of their slots
    (``missing`` of the policy's ``n_all`` events lack one): no event, propensities missing, or one event only."""
    lacking = f"; {missing} event(s) lack a propensity on a held slot" if missing else ""
    if n == 1:
        return (f"only one event logs every propensity of the slots it holds{lacking}: the estimate's variance and "
                f"interval need at least two; use a longer window (or log the missing propensities)")
    if missing or n_all:
        return (f"no event logs every propensity of the slots it holds (propensity-free logs{lacking}): the IPS/PI "
                f"family needs logged propensities; scavenging, factored and re-ordering do not")
    return "the policy decides no event in the window: the IPS/PI family has no event to average"


def _slate_one(S, name, m, opts, folds):
    if name == "slate_pi_plus_plus":
        return S.pi_plus_plus(m, opts.prior_mean, None, opts.level)
    if name == "slate_pi_beta":
        return S.pi_beta(m, opts.level, folds=folds)
    fn = {"slate_ips": S.ips, "slate_snips": S.snips, "slate_pi": S.pi, "slate_wpi": S.wpi}[name]
    return fn(m, opts.level)
