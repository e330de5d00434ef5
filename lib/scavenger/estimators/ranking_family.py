"""The ranking family (Open Bandit Pipeline's slate estimators; docs/ranking.md): independent IPS, reward-interaction
(cascade) IPS, their self-normalized forms and Cascade-DR (Kiyohara et al., WSDM 2022), declared for the registry.
Each reads the merged ``ranking_sums`` (and ``ranking_dr``) tables of the one pass and calls the pure estimators of
:mod:`.ranking`; slate IPS and its self-normalized form (SIPS) are the slate family's slate_ips and slate_snips.

Which assumption each rests on: IIPS and its self-normalized form weight each slot by its own ratio, right only when
a slot's reward does not depend on the ads above it (check f); RIPS, SN-RIPS and Cascade-DR weight slot k by the
prefix 1..k, right under the cascade too. All need logged propensities (checks c, e) and factorized logging (d).
"""
from __future__ import annotations

import math

from . import ranking as R
from . import ranking_sequences as RQ
from .declaration import Estimator
from .rows import not_identified, row, slot_weight_bounds


def _sums(stats, policy_id: str) -> R.Sums | None:
    long = stats.table("ranking_sums") if "ranking_sums" in stats.tables else None
    if long is None or not len(long):
        return None
    long = long[long["policy_id"] == policy_id]
    dr = stats.table("ranking_dr") if "ranking_dr" in stats.tables else None
    if dr is not None and len(dr):
        dr = dr[dr["policy_id"] == policy_id]
    return R.Sums(long, dr) if len(long) else None


def _estimates(stats, policy_id: str, options) -> dict:
    s = _sums(stats, policy_id)
    if s is None:
        return {}
    bounds = tuple(getattr(options, "reward_bounds", None) or (0.0, 1.0))   # a slot reward's declared range
    ymax = slot_weight_bounds(stats)
    out = R.estimates(s, ymax=ymax, reward_bounds=bounds, level=options.level)
    return {**out, "_sequence": lambda name: RQ.estimate_columns(stats, policy_id, name, options, ymax, s.K, bounds)}


def _left_out(e: R.RankingEstimate) -> dict:
    """The events' slots the estimator could not weight, with the reasons (they count in n with no term)."""
    why = {"n_missing_propensity": "a held slot without a logged propensity",
           "n_no_prefix": "position 1 not held or without a propensity: no cascade prefix",
           "n_broken_prefix": "a held position past the last one with a propensity: left out of the prefix from there",
           "n_beyond": "slots beyond the pass's wide positions: no interval"}
    counts = {k: int(e.extra.get(k, 0) or 0) for k in why}
    text = "; ".join(f"{why[k]}: {n}" for k, n in counts.items() if n)
    return {"n_missing_propensity": counts["n_missing_propensity"], "unused_reasons": text or None}


def ranking_estimate(stats, policy_id: str, options, name: str) -> dict:
    """One estimator of the family for one policy, as a row of the estimates table."""
    found = options.cached(("ranking", policy_id), lambda: _estimates(stats, policy_id, options))
    est = found.get(name)
    if est is None:
        return not_identified(policy_id, name, "no ranking sums for this policy in the window (no clean event it "
                                               "decides holds a slot with a propensity)", 0, options.level)
    extra = _left_out(est)
    note = "extended to hold the estimate" if est.extra.get("extended_to_estimate") else None
    if not est.identified:
        return not_identified(policy_id, name, est.reason, est.n_events, options.level, **extra)
    kind = est.interval_kind if math.isfinite(est.ci_low) and math.isfinite(est.ci_high) else "none"
    extra.update(found["_sequence"](name))       # its anytime-valid band (estimators/ranking_sequences.py)
    return row(policy_id, name, est.value, est.std_error, est.ci_low, est.ci_high, kind, est.n_events,
               options.level, reason=est.reason, note=note, **extra)


def _iips(stats, p, options):
    return ranking_estimate(stats, p, options, "slate_iips")


def _sniips(stats, p, options):
    return ranking_estimate(stats, p, options, "slate_sniips")


def _rips(stats, p, options):
    return ranking_estimate(stats, p, options, "slate_rips")


def _snrips(stats, p, options):
    return ranking_estimate(stats, p, options, "slate_snrips")


def _cascade_dr(stats, p, options):
    return ranking_estimate(stats, p, options, "slate_cascade_dr")


_ADDITIVE, _CASCADE = ("b", "c", "d", "e", "f"), ("b", "c", "d", "e")
_TABLES = ("ranking_sums", "policy_events")
_NEEDS = "logged propensities (factorized logging) at the positions each event holds"
ESTIMATORS = (
    Estimator(name="slate_iips", summary="(1/n) sum_i sum_k Y_ik r_ik, Y_k = pi_k/mu_k (independent IPS; obp "
                                         "SlateIndependentIPS)", estimate=_iips, aliases=("iips",), family="ranking",
              default=False,
              checks=_ADDITIVE, tables=_TABLES, needs_propensities=True, identification=_NEEDS, recommend_rank=13),
    Estimator(name="slate_sniips", summary="sum_k (N_k/n) sum_i Y_ik r_ik / sum_i Y_ik (self-normalized IIPS)",
              estimate=_sniips, aliases=("sniips",), family="ranking",
              default=False, checks=_ADDITIVE, tables=_TABLES,
              needs_propensities=True, identification=_NEEDS, recommend_rank=14),
    Estimator(name="slate_rips", summary="(1/n) sum_i sum_k (prod_{j<=k} Y_ij) r_ik (reward-interaction / cascade "
                                         "IPS; obp SlateRewardInteractionIPS)", estimate=_rips, aliases=("rips",),
              family="ranking",
              default=False, checks=_CASCADE, tables=_TABLES, needs_propensities=True, identification=_NEEDS,
              recommend_rank=4),
    Estimator(name="slate_snrips", summary="sum_k (N_k/n) sum_i V_ik r_ik / sum_i V_ik, V_k = prod_{j<=k} Y_j "
                                           "(self-normalized RIPS)", estimate=_snrips, aliases=("snrips",),
              family="ranking",
              default=False, checks=_CASCADE, tables=_TABLES, needs_propensities=True, identification=_NEEDS,
              recommend_rank=15),
    Estimator(name="slate_cascade_dr", summary="(1/n) sum_i sum_k [V_ik (r_ik - q_k(a_ik)) + V_i,k-1 E_pi q_k] with "
                                               "q the cross-fitted reward-to-go model (Cascade-DR, Kiyohara et al. "
                                               "2022)", estimate=_cascade_dr, aliases=("cascade_dr",),
              family="ranking",
              default=False, checks=_CASCADE, tables=_TABLES + ("ranking_dr",), needs_propensities=True,
              identification=_NEEDS, recommend_rank=3, improves_on="slate_rips"),
)
