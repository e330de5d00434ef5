"""The estimators that read the ADCs (seed 001 section 4): factored and re-ordering, declared for the registry, with
the ADC vector of the run from :mod:`.adc_source` (and the ADC job's declaration)."""
from __future__ import annotations

import math

import pandas as pd

from .adc_source import (AdcContext, adc_context, adc_identification, adc_rows,  # noqa: F401 - the family's API
                         read_adc_table, resolve_adc)
from .declaration import Estimator
from .rows import _policy_events, derived, not_identified, row


def _tables(stats) -> dict:
    from . import factored as F

    ap = stats.table("ad_position")
    return {**{n: stats.table(n) for n in ("factored", "factored_sq", "target_placements", "ad_position")},
            "policy_ads": stats.table("policy_ads") if "policy_ads" in stats.tables else None,
            "reorder_pairs": stats.table("reorder_pairs") if "reorder_pairs" in stats.tables else None,
            "strata": derived(stats, "ad_strata", lambda: F.ad_strata(ap))}


def _policy_inputs(stats, p: str, options) -> dict:
    """One target's rows of the factored tables, its T_a and eligibility-strata shares, and whether it re-orders
    the logged ads on every event (made once per window and policy: factored and reorder both read them)."""
    return options.cached(("adc_inputs", p), lambda: _made_policy_inputs(stats, p, options))


def _counts(stats, p: str) -> tuple[int, bool]:
    """(the target's decided events, whether it re-orders the logged ads on every event): all that factored and
    reorder read before they know whether the ADCs are identified (the window's per-policy sums)."""
    n = _policy_events(stats, p, "n_events")
    return n, bool(n > 0 and _policy_events(stats, p, "n_reorder") == n)


def _made_policy_inputs(stats, p: str, options) -> dict:
    from . import factored as F

    t = options.cached("adc_tables", lambda: _tables(stats))
    fac, fsq, ap, pa = t["factored"], t["factored_sq"], t["ad_position"], t["policy_ads"]
    n, reorders = _counts(stats, p)
    # T_a and the logged clicks among the events this policy decides (policy_ads): a target whose decisions
    # cover part of the log is not scaled down by that share; tables made without it: every logged event
    ap_p = pa[pa["policy_id"] == p] if pa is not None else ap
    strata = t["strata"]
    return {"n": n, "f_p": fac[fac["policy_id"] == p] if len(fac) else fac,
            "q_p": fsq[fsq["policy_id"] == p] if len(fsq) else fsq, "ap_p": ap_p,
            "reorders": reorders,
            "T_a": F.ad_impressions(ap_p) if len(ap_p) else pd.Series(dtype=float),
            # eligibility strata: T_s / T among the same events (ap, without policy_ads' ev: every logged event)
            "w_p": None if strata is None else F.strata_shares(strata, ap_p if "ev" in ap_p.columns else ap),
            "placements": (t["target_placements"][t["target_placements"]["policy_id"] == p]
                           if len(t["target_placements"]) else None),
            "pairs": None if t["reorder_pairs"] is None else
            (t["reorder_pairs"][t["reorder_pairs"]["policy_id"] == p] if len(t["reorder_pairs"]) else
             t["reorder_pairs"])}


def factored(stats, p: str, options) -> dict:
    """Factored (seed 001 section 4.2) for any target that does not copy the logged slate."""
    ctx = adc_context(stats, options)
    n, reorders = _counts(stats, p)
    extra = {"adc_source": ctx.adc_source, "adc_method": options.adc_method}
    if reorders:
        return not_identified(p, "factored", "the target re-orders the logged ads event by event: its choice "
                                             "depends on the logged slate, not on the context alone as the "
                                             "factored estimator needs (see reorder)", n, options.level, **extra)
    if ctx.C is None:          # no ADC vector: the target's inputs are not needed
        return not_identified(p, "factored", ctx.adc_reason, n, options.level, **extra)
    x = _policy_inputs(stats, p, options)
    return _factored_row(p, n, x["f_p"], x["q_p"], x["T_a"], x["placements"], x["w_p"], ctx, extra)


def reorder(stats, p: str, options) -> list[dict]:
    """Re-ordering and its lift (seed 001 sections 4.2-4.4) for a target that re-orders the logged ads."""
    ctx = adc_context(stats, options)
    n, reorders = _counts(stats, p)
    extra = {"adc_source": ctx.adc_source, "adc_method": options.adc_method}
    if not reorders:
        if p in options.derived or "reorder" in options.named:
            return [not_identified(p, "reorder", "the target does not re-order the logged ads on every event", n,
                                   options.level, **extra)]
        return []
    if ctx.C is None:
        return [not_identified(p, "reorder", ctx.adc_reason, n, options.level, **extra)]
    x = _policy_inputs(stats, p, options)
    return _reorder_rows(p, n, x["f_p"], x["q_p"], x["ap_p"], ctx, extra, x["pairs"])


def _factored_row(p, n: int, f_p, q_p, T_a, placements, strata, ctx: AdcContext, extra: dict) -> dict:
    """The factored estimate of one target (seed 001 section 4), its variance with the ADC's own (joint delta
    method, estimators/propagate.py); per eligibility stratum V = sum_s (T_s/T) V_s when the ads are partitioned."""
    from . import factored as F
    from . import propagate as P
    from .intervals import clt_or_none

    opts = ctx.options            # ctx.C is set: factored() answers an unidentified ADC before the inputs
    strata_note = (None if strata is None else
                   f"ads partitioned by the calibration key into {strata.attrs['strata']} eligibility strata: "
                   f"V = sum_s (T_s/T) V_s")
    est = F.factored_estimate(f_p, q_p, T_a, ctx.C, placements, opts.level, weights=strata)
    if not est["identified"]:      # the target uses a position the ADC vector lacks
        return not_identified(p, "factored", est["reason"], n, opts.level, **extra)
    from .slate_basis import _sq

    se = math.sqrt(P.factored_variance(f_p, q_p, T_a, ctx.C, _sq(est["std_error"]), ctx.adc_influence, ctx.C_se,
                                       weights=strata))
    lo, hi, kind, why = clt_or_none(est["value"], se, opts.level)
    return row(p, "factored", est["value"], se, lo, hi, kind, n, opts.level, reason=why,
               supported_share=est["supported_share"], unsupported_share=est["unsupported_share"], note=strata_note,
               **extra)


def _reorder_rows(p, n: int, f_p, q_p, ap, ctx: AdcContext, extra: dict, pairs=None) -> list[dict]:
    """The re-ordering estimate of one target and its lift over the logged order (seed 001 section 4); ``pairs``:
    its ``reorder_pairs`` rows (the event-level variance). With ADCs estimated from the same logs the ADC's terms
    (estimators/propagate.py) are per impression, so the estimate's own variance is taken per impression too: mixing
    an event-level own variance with per-impression ADC terms under-covered when clicks within an event move
    together (a per-user factor x0.3/x1.7: lift std error 0.0051 against a spread of 0.0069; per impression
    0.0108, conservative). With ADCs given (a table or numbers), the event-level variance is exact."""
    from . import propagate as P
    from . import reordering as R
    from .intervals import clt_or_none

    from .attention_decay import rewarded

    opts = ctx.options
    if not (len(ap) and "m" in ap.columns and float(rewarded(ap)["m"].sum()) > 0):
        why = ("no slot reward is known on the target's events (rows with a slate_reward and null slot rewards): "
               "re-ordering moves slot rewards between positions, so it needs them")
        return [not_identified(p, "reorder", why, n, opts.level, **extra)]
    if ctx.adc_influence is not None:
        pairs = None
    est = R.reorder_estimate(f_p, q_p, ap, ctx.C, n, opts.level, pairs=pairs)
    var_v, var_l = P.reorder_variances(f_p, q_p, ap, ctx.C, n, est, ctx.adc_influence, ctx.C_se)
    # the lift (a ratio) is no value per event: the estimates table holds one quantity, so it rides in the note
    note = (f"unnormalized V(h_pi)={est['total']:.6g} clicks; lift over the logged order {est['lift']:.6g} "
            f"(std error {math.sqrt(var_l):.3g}): expected clicks under the new order per logged click")
    se = math.sqrt(var_v)
    lo, hi, kind, why = clt_or_none(est["value"], se, opts.level)
    return [row(p, "reorder", est["value"], se, lo, hi, kind, n, opts.level, reason=why, supported_share=1.0,
                unsupported_share=0.0, note=note, **extra)]


_CHECKS = ("a", "b")
_ADDITIVE = _CHECKS + ("f",)    # factored and re-ordering move slot rewards between positions: additive slots
_TABLES = ("factored", "factored_sq", "ad_position", "policy_ads", "policy_events")
ESTIMATORS = (
    Estimator(name="factored", summary="V = sum_a sum_{i,j} F(a,i,j) C_j / C_i / T_a (seed 001 sec. 4.2)",
              estimate=factored, family="adc_based", checks=_ADDITIVE, tables=_TABLES + ("target_placements",),
              identification="ADCs identified (ads shown at two or more positions) and every ad the target shows "
                             "logged", recommend_rank=6),
    Estimator(name="reorder",
              summary="V(h_pi) = sum_{a,i,j} F(a,i,j) C_j / C_i per event; its lift V / logged clicks in the note "
                      "(seed 001 sec. 4.2-4.4)",
              estimate=reorder, aliases=("reordering",), family="adc_based", checks=_ADDITIVE,
              tables=_TABLES + ("reorder_pairs",),
              identification="the target re-orders the logged ads on every event, and ADCs are identified",
              recommend_rank=7, derived=True),
)
ADC = Estimator(name="adc", summary="C_i = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1) (seed 001 sec. 4.3)",
                estimate=adc_rows, checks=_CHECKS, tables=("ad_position", "log_summary"), needs_decisions=False,
                default=False, identification="some ad shown at position 1 and at position i")
