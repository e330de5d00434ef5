"""The slate family (seed 002): IPS, SNIPS, PI, wPI, PI++ and pi_beta of a policy from its slate moments, with the
empirical-likelihood intervals of estimators/intervals.py; not identified without logged propensities."""
from __future__ import annotations

import math

import numpy as np

from ..statistics.moment_columns import moments_k
from ..statistics.tables import _is_max
from .declaration import Estimator
from .intervals import MIN_MATCHING, matching_reason
from .rows import (derived, not_identified, pair_support, reorder_reason, reorders_logged_slate, row,
                     short_events, short_reason, slot_weight_bounds, weight_and_reward_bounds)


def slate_moments(stats, policy_id: str, fold: int | None = None):
    """SlateMoments of a policy over the window (summed over logging policies and folds, or one fold)."""
    from .slate_moments import SlateMoments

    t = derived(stats, "slate_moment_rows", lambda: _moment_rows(stats.table("slate_moments")))
    if t is None:
        return None
    idx = t["rows"].get(policy_id)
    if idx is not None and fold is not None:
        idx = idx[t["fold"][idx] == fold]
    if idx is None or not len(idx):
        return None
    arr = t["values"][idx]
    with np.errstate(invalid="ignore"):
        top = np.where(np.isnan(arr), -np.inf, arr).max(axis=0)
    total = np.where(t["is_max"], np.where(top > -np.inf, top, np.nan), np.nansum(arr, axis=0))
    return SlateMoments.from_flat(dict(zip(t["columns"], total.tolist())), t["K"])


def _moment_rows(sm) -> dict | None:
    """The window's slate moments as one array (NaN beside events, n > 0, as inf: 0 * inf or inf - inf, weights
    beyond double precision, which must not sum away as 0), with each policy's rows: read once per window by
    every estimator, policy and fold (:func:`slate_moments`)."""
    if not len(sm):
        return None
    vals = sm.drop(columns=[c for c in ("dt", "policy_id", "logging_policy", "fold") if c in sm.columns])
    arr = vals.to_numpy(dtype=float)
    if "n" in vals.columns:
        with np.errstate(invalid="ignore"):
            arr = np.where(np.isnan(arr) & (vals["n"].to_numpy(dtype=float) > 0)[:, None], np.inf, arr)
    return {"values": arr, "columns": list(vals.columns), "K": moments_k(sm),
            "is_max": np.array([_is_max("slate_moments", c) for c in vals.columns], dtype=bool),
            "rows": sm.groupby("policy_id", sort=False).indices,
            "fold": sm["fold"].to_numpy() if "fold" in sm.columns else np.full(len(sm), -1)}


def _prepared(stats, policy_id: str, options) -> dict:
    """What the family's estimators of one policy share (cached per policy): the moments, the folds, the
    intervals' bounds, the supported share and the unused-row counts; or ``reason`` when none is identified (no
    event with every propensity, a target that leaves a held position empty or re-orders the logged slate)."""
    m = slate_moments(stats, policy_id)
    pe = stats.table("policy_events")
    n_all = int(pe.loc[pe["policy_id"] == policy_id, "n_events"].sum()) if len(pe) else 0
    missing = int(m.n_missing_propensity) if m is not None else n_all
    unused = {"n_unused": missing, "n_missing_propensity": missing,
              "unused_reasons": f"missing propensity on a held slot: {missing}" if missing else None}
    out = {"m": m, "unused": unused, "n": 0 if m is None else int(m.n), "reason": None}
    if m is None or m.n <= 1:
        out["reason"] = too_few_events_reason(out["n"], missing, n_all)
        return out
    short = short_events(stats, policy_id)
    if short:
        # pi_k(a_k | x) = 0 at an empty position makes Y_k = 0 and G = 1 - K + sum_k Y_k < 0: no value of the target
        out["reason"] = short_reason(short, n_all, "the importance weights Y_k = pi_k/mu_k")
        return out
    if reorders_logged_slate(stats, policy_id) and np.any(slot_weight_bounds(stats) > 1.0):
        # pi_k(a_k | x) is 1 for the logged ad because it was logged: E_mu[Y_k] = 1 fails (a logger of
        # propensity 1 everywhere drew nothing at random, and its re-ordering is a function of the context)
        out["reason"] = reorder_reason("the importance weights Y_k = pi_k/mu_k (E_mu[Y_k] = 1 needs a target that "
                                       "does not see the logged ad)")
        return out
    out["folds"] = (slate_moments(stats, policy_id, 0), slate_moments(stats, policy_id, 1))
    out["bounds"] = weight_and_reward_bounds(stats, getattr(options, "reward_bounds", None))
    # the target's mass on (position, ad) pairs the logs show (check c's measure); the share of events whose
    # logged slate matches the target's (W > 0) is the diagnostics' share_W_nonzero, not a support: it was given
    # here before, so a fully supported target of a uniform logger over 12 slates read 8% supported
    out["supported"] = pair_support(stats, policy_id)
    from . import slate as S

    if getattr(options, "keeps_side", True):
        options.side["diagnostics"].extend(S.diagnostics_frame(m, policy_id, options.prior_mean).to_dict("records"))
    return out


def slate_estimate(stats, policy_id: str, options, name: str, estimate, interval, needs_match: bool = False
                   ) -> dict:
    """One estimator of the family for one policy: ``estimate(m, options, folds)`` -> SlateEstimate, its interval
    ``interval(est, m, wmax, ymax, rmin, rmax, level)`` -> (lo, hi, kind, reason); ``needs_match``: not identified
    when no logged slate matches the target's (W = 0 on every event: IPS, SNIPS)."""
    c = options.cached(("slate_family", policy_id), lambda: _prepared(stats, policy_id, options))
    level = options.level
    if c["reason"]:
        return not_identified(policy_id, name, c["reason"], c["n"], level, **c["unused"])
    m = c["m"]
    est = estimate(m, options, c["folds"])
    extra = dict(c["unused"])
    if math.isfinite(c["supported"]):
        extra.update(supported_share=c["supported"], unsupported_share=1.0 - c["supported"])
    ident = getattr(est, "identified", True)
    lo, hi, kind, reason = interval(est, m, *c["bounds"], level)
    if not ident:           # the weights overflow double precision (estimators/slate_basis.py): say why
        reason = est.reason
    if needs_match and m.n_W_pos == 0:
        ident, reason = False, ("no logged slate matches the target's (W = 0 on every event): "
                                "IPS has no matching event to average")
    elif needs_match and m.n_W_pos < MIN_MATCHING:
        ident, reason = False, matching_reason(int(m.n_W_pos))
    if ident and math.isfinite(est.value):       # its anytime-valid band (estimators/slate_sequences.py)
        from .slate_sequences import estimate_columns

        extra.update(estimate_columns(stats, policy_id, name, options, c["bounds"]))
    return row(policy_id, name, est.value, est.std_error, lo, hi, kind, est.n_events, level, identified=ident,
               reason=reason, prior_mean=est.extra.get("prior_mean"), prior_source=est.extra.get("prior_source"),
               **extra)


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


# ---- the family's declarations: one estimate function each ----------------------------------------------------
def _ips(stats, policy_id, options):
    from . import slate as S
    from .intervals import weight_interval

    return slate_estimate(stats, policy_id, options, "slate_ips", lambda m, o, f: S.ips(m, o.level),
                          weight_interval, needs_match=True)


def _snips(stats, policy_id, options):
    from . import slate as S
    from .intervals import weight_interval

    return slate_estimate(stats, policy_id, options, "slate_snips", lambda m, o, f: S.snips(m, o.level),
                          weight_interval, needs_match=True)


def _pi(stats, policy_id, options):
    from . import slate as S
    from .intervals import design_t_interval

    return slate_estimate(stats, policy_id, options, "slate_pi", lambda m, o, f: S.pi(m, o.level),
                          design_t_interval)


def _wpi(stats, policy_id, options):
    from . import slate as S
    from .intervals import design_t_interval

    return slate_estimate(stats, policy_id, options, "slate_wpi", lambda m, o, f: S.wpi(m, o.level),
                          design_t_interval)


def _pi_plus_plus(stats, policy_id, options):
    from . import slate as S
    from .intervals import design_t_interval

    return slate_estimate(stats, policy_id, options, "slate_pi_plus_plus",
                          lambda m, o, f: S.pi_plus_plus(m, o.prior_mean, None, o.level), design_t_interval)


def _pi_beta(stats, policy_id, options):
    from . import slate as S
    from .intervals import design_t_interval

    return slate_estimate(stats, policy_id, options, "slate_pi_beta",
                          lambda m, o, f: S.pi_beta(m, o.level, folds=f), design_t_interval)


def slate_difference(stats, policy_id: str, baseline: str, options, name: str) -> dict:
    """``name``'s estimate for ``policy_id`` minus the baseline's on the same events: ``logging`` (what the logs
    earned) from the slate moments, another target from the pair moments (estimators/differences.py,
    pair_differences.py)."""
    from .differences import LOGGING, minus_logging
    from .pair_differences import minus_policy

    def prepare(p):
        return options.cached(("slate_family", p), lambda: _prepared(stats, p, options))

    if baseline == LOGGING:
        return minus_logging(stats, policy_id, name, options, prepare(policy_id))
    return minus_policy(stats, policy_id, baseline, name, options, prepare(policy_id), prepare)


def _difference(name: str):
    return lambda stats, policy_id, baseline, options: slate_difference(stats, policy_id, baseline, options, name)


_CHECKS, _TABLES = ("b", "c", "d", "e"), ("slate_moments", "policy_events")
_ADDITIVE = _CHECKS + ("f",)    # the PI family assumes additive slots (r = sum_k f_k(x, a_k)): check f
_FACTORIZED = "logged propensities (factorized logging)"
_MATCHING = "logged propensities and some logged slate the target would show"
ESTIMATORS = (
    Estimator(name="slate_ips", difference=_difference("slate_ips"),
              summary="mean(r W), W = prod_k pi_k/mu_k (seed 002 eq. 2)", estimate=_ips,
              aliases=("ips",), family="slate", checks=_CHECKS, tables=_TABLES, needs_propensities=True,
              identification=_MATCHING, recommend_rank=5),
    Estimator(name="slate_snips", difference=_difference("slate_snips"),
              summary="sum(r W) / sum(W) (self-normalized IPS)", estimate=_snips,
              aliases=("snips",), family="slate", checks=_CHECKS, tables=_TABLES, needs_propensities=True,
              identification=_MATCHING, recommend_rank=10),
    Estimator(name="slate_pi", difference=_difference("slate_pi"),
              summary="mean(r G), G = 1 - K + sum_k Y_k (seed 002 eq. 4, pseudoinverse)",
              estimate=_pi, aliases=("pi",), family="slate", checks=_ADDITIVE, tables=_TABLES,
              needs_propensities=True, identification=_FACTORIZED, recommend_rank=2),
    Estimator(name="slate_wpi", difference=_difference("slate_wpi"),
              summary="sum(r G) / sum(G) (weighted PI)", estimate=_wpi, aliases=("wpi",),
              family="slate", checks=_ADDITIVE, tables=_TABLES, needs_propensities=True,
              identification=_FACTORIZED, recommend_rank=11),
    Estimator(name="slate_pi_plus_plus", difference=_difference("slate_pi_plus_plus"),
              summary="mean(r G) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k) (seed 002 eqs. 25-26, 39)",
              estimate=_pi_plus_plus, aliases=("pi_plus_plus", "pipp", "pi++"), family="slate", checks=_ADDITIVE,
              tables=_TABLES, needs_propensities=True, identification=_FACTORIZED, recommend_rank=1,
              improves_on="slate_pi", predicted_reduction="predicted_nmse_reduction"),
    Estimator(name="slate_pi_beta", difference=_difference("slate_pi_beta"),
              summary="mean(r G) - sum_k beta_k mean(Y_k - 1), beta fitted by cross-fitting (control variates)",
              estimate=_pi_beta, aliases=("pi_beta", "beta"), family="slate", checks=_ADDITIVE, tables=_TABLES,
              needs_propensities=True, identification=_FACTORIZED, recommend_rank=12, improves_on="slate_pi"),
)
