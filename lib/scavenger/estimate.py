"""Estimates from a window's statistics: one function per estimator family, each calling the pure estimators of
``estimators/`` on the merged tables, and saying "not identified: why" where the data cannot support a number.

Every function returns rows of the estimates table (``registry.ESTIMATE_COLUMNS``); the pipeline adds the window,
the check verdicts and the recommended flag. No Spark or DuckDB here except :func:`scavenging_sums`, the one
reduction of the big slate tables, which runs on the engine that holds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import registry
from .statistics.tables import _is_max, moments_k


@dataclass
class Context:
    """What every estimate of a run shares: the options, the ADC used by factored/reorder, cached sums."""

    options: object
    window: str = ""
    adc_table: pd.DataFrame | None = None
    C: np.ndarray | None = None
    C_se: np.ndarray | None = None
    adc_influence: pd.DataFrame | None = None   # the estimated ADC's linearisation (estimators/propagate.influence)
    adc_source: str | None = None
    adc_reason: str | None = None
    scavenging: pd.DataFrame | None = None
    diagnostics: list = field(default_factory=list)


def row(policy_id, estimator, value=math.nan, se=math.nan, lo=math.nan, hi=math.nan, kind="none", n=0,
        level=None, identified=True, reason=None, **extra) -> dict:
    out = {c: None for c in registry.ESTIMATE_COLUMNS}
    out.update({"policy_id": policy_id, "estimator": estimator, "value": value, "std_error": se, "ci_low": lo,
                "ci_high": hi, "interval_kind": kind, "n_events": int(n), "level": level,
                "identified": bool(identified), "reason": reason, "n_unused": 0})
    out.update(extra)
    if not identified:
        out.update({"value": math.nan, "std_error": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                    "interval_kind": "none"})
    return out


def not_identified(policy_id, estimator, reason, n=0, level=None, **extra) -> dict:
    return row(policy_id, estimator, n=n, level=level, identified=False, reason=reason, **extra)


# ---- slate family (seed 002) ----------------------------------------------------------------------------------
def slate_moments(stats, policy_id: str, fold: int | None = None):
    """SlateMoments of a policy over the window (summed over logging policies and folds, or one fold)."""
    from .estimators.slate import SlateMoments

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
    is_max = np.array([_is_max("slate_moments", c) for c in vals.columns])
    with np.errstate(invalid="ignore"):
        top = np.where(np.isnan(arr), -np.inf, arr).max(axis=0)
    total = np.where(is_max, np.where(np.isfinite(top), top, np.nan), np.nansum(arr, axis=0))
    return SlateMoments.from_flat(dict(zip(vals.columns, total.tolist())), K)


def reward_range(stats) -> tuple[float, float]:
    ls = stats.table("log_summary")
    if not len(ls):
        return 0.0, 1.0
    return float(min(0.0, ls["r_min"].min())), float(max(1.0, ls["r_max"].max()))


def weight_and_reward_bounds(stats) -> tuple[float, np.ndarray, float, float]:
    """(wmax, ymax, rmin, rmax), the bounds estimators/intervals.slate_interval takes (ymax: ``slot_weight_bounds``)
    of the empirical-likelihood intervals: wmax = prod_k 1/min mu_k over the window's logged
    propensities (estimators/intervals.weight_bound), over the m positions with the smallest min mu_k when no row
    holds more than m slots (partial slates); rewards in [min(0, r_min), max(r_max, m max(1, slot max))] (a row's
    reward sums at most m <= K slot rewards, each declared <= 1 unless larger ones were logged)."""
    from .estimators.intervals import weight_bound

    ap, lc = stats.table("ad_position"), stats.table("log_counts")
    # partial slates: a row holds at most `held` slots (Y_k = 1 elsewhere), so W is at most the product of the
    # `held` largest 1/min mu_k, and its reward the sum of `held` slot rewards (one-slot OBD rows: 1/mu, one click)
    held = int(lc["max_slots"].max()) if len(lc) and "max_slots" in lc and lc["max_slots"].notna().any() else 0
    min_p = ap.groupby("position")["min_p"].min().to_numpy(float) if len(ap) else np.array([])
    min_p = np.sort(min_p[np.isfinite(min_p) & (min_p > 0)])
    wmax = weight_bound(min_p[:held] if 0 < held < len(min_p) else min_p) if len(ap) else math.inf
    slot_max = float(lc["max_reward"].max()) if len(lc) and lc["max_reward"].notna().any() else 1.0
    lo, hi = reward_range(stats)
    k_held = min(held, stats.K) if held > 0 else stats.K
    return wmax, slot_weight_bounds(stats), lo, max(hi, max(k_held, 1) * max(1.0, slot_max))


def slot_weight_bounds(stats) -> np.ndarray:
    """ymax_k = 1/min mu_k over the window's logged propensities at position k (no Y_k = pi_k/mu_k exceeds it; 1
    where no propensity was logged): the phantom of the PI family's empirical-likelihood interval."""
    ap, K = stats.table("ad_position"), max(stats.K, 1)
    low = ap.groupby("position")["min_p"].min() if len(ap) else pd.Series(dtype=float)
    p = np.array([float(low.get(k, math.nan)) for k in range(1, K + 1)])
    return np.where(np.isfinite(p) & (p > 0), 1.0 / np.minimum(np.where(p > 0, p, 1.0), 1.0), 1.0)


def slate_rows(stats, policy_id: str, wanted: list, ctx: Context) -> list[dict]:
    """IPS, SNIPS, PI, wPI, PI++ and pi_beta of one policy; not identified without logged propensities."""
    from .estimators import slate as S
    from .estimators.intervals import slate_interval

    opts = ctx.options
    m = slate_moments(stats, policy_id)
    pe = stats.table("policy_events")
    n_all = int(pe.loc[pe["policy_id"] == policy_id, "n_events"].sum()) if len(pe) else 0
    missing = int(m.n_missing_propensity) if m is not None else n_all
    unused = {"n_unused": missing, "n_missing_propensity": missing,
              "unused_reasons": f"missing propensity on a held slot: {missing}" if missing else None}
    if m is None or m.n <= 1:
        reason = ("no event logs every propensity of the slots it holds (propensity-free logs): the IPS/PI "
                  "family needs logged propensities; scavenging, factored and re-ordering do not")
        return [not_identified(policy_id, e, reason, 0, opts.level, **unused) for e in wanted]
    folds = (slate_moments(stats, policy_id, 0), slate_moments(stats, policy_id, 1))
    bounds = weight_and_reward_bounds(stats)
    out = []
    for e in wanted:
        est = _slate_one(S, e, m, opts, folds)
        extra = dict(unused)
        if e in ("slate_ips", "slate_snips"):
            extra["supported_share"] = m.n_W_pos / m.n if m.n else math.nan
        ident = getattr(est, "identified", True)
        lo, hi, kind, reason = slate_interval(e, est, m, *bounds, opts.level)
        if e in ("slate_ips", "slate_snips") and m.n_W_pos == 0:
            ident, reason = False, ("no logged slate matches the target's (W = 0 on every event): "
                                    "IPS has no matching event to average")
        out.append(row(policy_id, e, est.value, est.std_error, lo, hi, kind,
                       est.n_events, opts.level, identified=ident, reason=reason,
                       prior_mean=est.extra.get("prior_mean"), prior_source=est.extra.get("prior_source"),
                       **extra))
    ctx.diagnostics.extend(S.diagnostics_frame(m, policy_id, opts.prior_mean).to_dict("records"))
    return out


def _slate_one(S, name, m, opts, folds):
    if name == "slate_pi_plus_plus":
        return S.pi_plus_plus(m, opts.prior_mean, None, opts.level)
    if name == "slate_pi_beta":
        return S.pi_beta(m, opts.level, folds=folds)
    fn = {"slate_ips": S.ips, "slate_snips": S.snips, "slate_pi": S.pi, "slate_wpi": S.wpi}[name]
    return fn(m, opts.level)


# ---- exploration scavenging (seed 001 section 3) ----------------------------------------------------------------
def scavenging_sums(stats, by_dt: bool = False) -> pd.DataFrame:
    """Per (policy, held positions[, dt]): the direct approach reduced by the engine from the big slate tables:
    t_s (logged events holding those positions), n_target, n_unsupported (target events whose slate was never
    logged), n_match, actions_used, v = sum_a S_a/T_a, var_clt = sum_a s2_a/T_a, inv_sqrt_t = sum over used
    actions of T_a^(-1/2), and the weighted sums of w = t_s/T_a over matched events (for the EL interval)."""
    from .statistics.sql.reduce import scavenging

    if "slate_actions" not in stats.big or "slate_targets" not in stats.big:
        return pd.DataFrame()
    return stats.engine.fetch(scavenging(stats.big["slate_actions"], stats.big["slate_targets"],
                                         stats.big_where(), by_dt), "scavenging_sums")


def scavenging_slate_rows(stats, policies: list, ctx: Context) -> list[dict]:
    """The direct approach for every deterministic target (seed 001 Theorem 3; Theorem 4 rows with
    --uniform-logging). V = sum_s (t_s/T) V_s over the strata of held positions (one stratum for full slates),
    = (1/T) sum_t w_t r_t with w_t = t_s/T_a on matching events: its interval is the empirical-likelihood one of
    estimators/intervals.py over those weights (w in [0, max t_s]); the Theorem 3 bound beside it."""
    from .estimators.intervals import WeightSums, el_interval, off_interval_reason
    from .estimators.scavenging import log_n_slates, theorem4_halfwidth

    EL_SUMS = ("sum_w", "sum_w2", "sum_wr", "sum_w2r", "sum_w2r2")

    opts = ctx.options
    pe = stats.table("policy_events").set_index("policy_id") if len(stats.table("policy_events")) else None
    ls = stats.table("log_summary")
    T = float(ls["n_events"].sum()) if len(ls) else 0.0
    sums = ctx.scavenging if ctx.scavenging is not None else pd.DataFrame()
    ap = stats.table("ad_position")
    n_ads = opts.n_ads or (int(ap["ad_id"].nunique()) if len(ap) else 0)
    log_k = log_n_slates(n_ads, max(stats.K, 1))
    lo_r, hi_r = reward_range(stats)
    _, _, r_lo, r_hi = weight_and_reward_bounds(stats)
    name = "scavenging_ad" if stats.K == 1 else "scavenging_slate"
    from .estimators.factored import stratum_weights

    strata = stratum_weights(ap)
    out = []
    for p in policies:
        if pe is None or p not in pe.index:
            continue
        n = int(pe.loc[p, "n_events"])
        det = int(pe.loc[p, "n_deterministic"])
        if strata is not None and det == n:
            # the events that logged a slate all come from its ads' stratum, so sum_a S_a/T_a adds the strata's
            # values instead of averaging them (seed 001 Theorem 1 needs exploration independent of x)
            out.append(not_identified(p, name, f"the calibration key partitions the ads into {strata.attrs['strata']} "
                                               f"eligibility strata (each ad shown under one value only): the "
                                               f"direct approach compares whole slates across them; evaluate one "
                                               f"stratum at a time (factored weights the strata)", n, opts.level))
            continue
        if det < n:
            out.append(not_identified(p, name, f"the target is stochastic on {n - det} of {n} events: the direct "
                                               f"approach needs a deterministic slate per event", n, opts.level))
            continue
        g = sums[sums["policy_id"] == p] if len(sums) else sums
        n_match = int(g["n_match"].sum()) if len(g) else 0
        unsupported = float(g["n_unsupported"].sum()) / n if n and len(g) else 1.0
        if n_match == 0:
            out.append(not_identified(p, name, "no logged slate equals the target's on any event: the direct "
                                               "approach has no matching event to average", n, opts.level,
                                      supported_share=1 - unsupported, unsupported_share=unsupported))
            continue
        share = g["t_s"].to_numpy(float) / T
        value = float(np.sum(share * g["v"].to_numpy(float)))
        se = float(math.sqrt(np.sum(share ** 2 * g["var_clt"].to_numpy(float))))
        extra = {"supported_share": 1 - unsupported, "unsupported_share": unsupported,
                 "note": f"matched={n_match} actions_used={int(g['actions_used'].sum())} k={math.exp(min(log_k, 700)):.6g}"}
        lo, hi = el_interval(WeightSums(T, *(float(g[c].sum()) for c in EL_SUMS)), 0.0,
                             max(float(g["t_s"].max()), 1.0 + 1e-9), r_lo, r_hi, opts.level)
        why = off_interval_reason(value, lo, hi, T, float(g["sum_w"].sum()), float(g["sum_w2"].sum()),
                                  1.0 - unsupported)
        out.append(row(p, name, value, se, math.nan if why else lo, math.nan if why else hi,
                       "none" if why else "el", n, opts.level, reason=why, **extra))
        if unsupported == 0:
            log_term = math.log(2.0) + log_k + math.log(T) - math.log(opts.delta)
            half = (hi_r - lo_r) * float(np.sum(share * math.sqrt(2.0 * log_term) * g["inv_sqrt_t"].to_numpy(float)))
            out.append(row(p, name, value, se, value - half, value + half, "bound", n, 1 - opts.delta, **extra))
        else:
            out.append(row(p, name, value, se, math.nan, math.nan, "none", n, 1 - opts.delta,
                           reason=f"{unsupported:.2%} of the target's events show a slate never logged: Theorem 3 "
                                  f"gives no bound for that mass", **extra))
        if opts.uniform_logging and len(g) == 1:
            k = math.exp(min(log_k, 700.0))
            v4 = k / T * float(g["s_match_r"].sum())
            var4 = (k * k * float(g["s_match_r2"].sum()) - T * v4 * v4) / (T - 1) if T > 1 else math.nan
            se4 = math.sqrt(max(var4, 0.0) / T) if T > 1 else math.nan
            h4 = theorem4_halfwidth(T, log_k, opts.delta, hi_r - lo_r)
            nm, sr, sr2 = float(g["n_match"].sum()), float(g["s_match_r"].sum()), float(g["s_match_r2"].sum())
            lo4, hi4 = el_interval(WeightSums(T, k * nm, k * k * nm, k * sr, k * k * sr, k * k * sr2), 0.0,
                                   max(k, 1.0 + 1e-9), r_lo, r_hi, opts.level)   # w = k on matching events
            why4 = off_interval_reason(v4, lo4, hi4, T, k * nm, k * k * nm)
            out.append(row(p, name + "_uniform", v4, se4, math.nan if why4 else lo4, math.nan if why4 else hi4,
                           "none" if why4 else "el", n, opts.level, reason=why4, **extra))
            out.append(row(p, name + "_uniform", v4, se4, v4 - h4, v4 + h4, "bound", n, 1 - opts.delta, **extra))
    return out


def scavenging_base_rows(stats, policies: list, ctx: Context) -> list[dict]:
    """Action = the base (logging) policy that served the event (seed 001 section 3.3)."""
    from .estimators import scavenging as sc

    opts = ctx.options
    df = sc.base_policy_estimates(stats, policies, opts.delta, opts.level, opts.uniform_logging)
    out = []
    pe = stats.table("policy_events")
    for p in policies:
        sub = df[df["policy_id"] == p] if len(df) else df
        if not len(sub):
            n = int(pe.loc[pe["policy_id"] == p, "n_events"].sum()) if len(pe) else 0
            out.append(not_identified(p, "scavenging_base", "the target does not name a base (logging) policy on "
                                                            "every event (decisions' base_policy column)", n,
                                      opts.level))
            continue
        for r in sub.to_dict("records"):
            ok = r["n_matched"] > 0
            kind = r["interval_kind"] if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"]) else "none"
            if kind == "clt" and not r["ci_high"] > r["ci_low"]:      # width 0: never for an estimated value
                r["ci_low"] = r["ci_high"] = math.nan
                kind = "none"
            out.append(row(p, r["estimator"], r["value"], r["std_error"], r["ci_low"], r["ci_high"], kind,
                           r["n_events"], r["level"], identified=ok,
                           reason=None if ok else "no event was served by the base policy the target names",
                           supported_share=r["supported_share"], unsupported_share=r["unsupported_share"],
                           note=f"matched={int(r['n_matched'])} actions_used={int(r['actions_used'])}"))
    return out


# ---- ADC and what reads it (seed 001 section 4) -----------------------------------------------------------------
def adc_identification(ad_position: pd.DataFrame) -> dict:
    """{position: reason} for the positions i > 1 whose ADC the data cannot identify: no ad was shown at both
    position 1 and position i (in slotted logs each ad is shown at one position only, so any ratio compares
    different ads)."""
    if not len(ad_position):
        return {}
    m = ad_position.groupby(["ad_id", "position"])["m"].sum().unstack(fill_value=0)
    out = {}
    if 1 not in m.columns:
        return {int(p): "no ad was shown at position 1, the reference of every ADC" for p in m.columns}
    for p in range(2, int(max(m.columns)) + 1):
        if p not in m.columns:
            out[p] = f"not identifiable: no impressions at position {p} in the window"
            continue
        both = int(((m[1] > 0) & (m[p] > 0)).sum())
        if both == 0:
            shared = int(((m > 0).sum(axis=1) > 1).sum())
            out[int(p)] = ("ADCs are not identifiable: no ad was shown at more than one position"
                           if shared == 0 else f"not identifiable: no ad was shown at both position 1 and {p}")
    return out


def adc_rows(stats, methods, level: float, dcg_base: float, smoothing: float) -> pd.DataFrame:
    """The ADC table with identification: rows the data cannot identify carry NaN and the reason."""
    from .estimators import adc as A

    ap = stats.table("ad_position")
    table = A.adc_table(ap, methods, level, dcg_base, smoothing)
    reasons = adc_identification(ap)
    table["identified"] = [int(p) not in reasons for p in table["position"]]
    table["reason"] = [reasons.get(int(p)) for p in table["position"]]
    # a ratio with no clicks at position 1 among the ads it uses (naive: at all) has no value either
    undefined = table["identified"] & ~np.isfinite(table["coefficient"].astype(float))
    table.loc[undefined, "identified"] = False
    table.loc[undefined, "reason"] = [f"not identifiable: no clicks at position 1 among the ads shown at both "
                                      f"position 1 and {int(p)}" for p in table.loc[undefined, "position"]]
    bad = ~table["identified"]
    for c in ("coefficient", "std_error", "ci_low", "ci_high"):
        table.loc[bad, c] = math.nan
    if "note" not in table.columns:
        table["note"] = None
    ranked = A.ranker_positions(ap)
    if ranked:   # confounded: its delta interval would not hold its level there, so none is given
        naive = (table["method"] == "naive") & table["position"].isin(ranked)
        table.loc[naive, ["ci_low", "ci_high"]] = math.nan
        table.loc[naive, "interval_kind"] = "none"
        table.loc[table["method"] == "naive", "note"] = (
            f"confounded at position(s) {','.join(map(str, ranked))}: the logger (a ranker) placed other ads there "
            f"than at position 1 (their logged propensities differ), so the naive ratio compares different ads and "
            f"has no interval; use an alpha-weighted method")
    table.loc[(table["method"] == "variance_optimal") & ("fold" in ap.columns), "note"] = \
        "cross-fitted: each fold's weights use the other fold's click variances"
    return table


def resolve_adc(stats, ctx: Context) -> None:
    """The ADC vector C_1..C_K factored and reorder use: estimated from the window, or a stored ADC table."""
    from .estimators import adc as A
    from .estimators import propagate as P

    opts = ctx.options
    if opts.adc in (None, "", "estimate"):
        ctx.adc_table = adc_rows(stats, A.METHODS, opts.level, opts.dcg_base, A.SMOOTHING)
        ctx.adc_source = "estimated"
    else:
        ctx.adc_table = read_adc_table(opts.adc)
        ctx.adc_source = str(opts.adc)
    sub = ctx.adc_table[(ctx.adc_table["method"] == opts.adc_method)]
    if "interval_kind" in sub.columns:
        sub = sub[sub["interval_kind"].isin(["delta", "crossfit", "none",
                                             sub["interval_kind"].iloc[0] if len(sub) else ""])]
    C = A.adc_vector(sub, opts.adc_method, max(stats.K, 1)) if len(sub) else np.full(max(stats.K, 1), np.nan)
    if not np.all(np.isfinite(C)) or np.any(C <= 0):
        reasons = sub[sub.get("identified", True) == False]["reason"].dropna().unique().tolist() \
            if "identified" in sub.columns else []  # noqa: E712
        ctx.adc_reason = (reasons[0] if reasons else f"the ADC vector has missing or non-positive coefficients "
                                                      f"{np.round(C, 4).tolist()}") + \
            "; pass --adc with an ADC table estimated from ranked logs"
        ctx.C = None
        return
    ctx.C = C
    se = sub.drop_duplicates("position").sort_values("position")["std_error"].to_numpy(float) \
        if "std_error" in sub.columns else None
    ctx.C_se = se if se is not None and len(se) == len(C) else None
    if ctx.adc_source == "estimated":   # same impressions: the joint delta method (estimators/propagate.py)
        ctx.adc_influence = P.influence(stats.table("ad_position"), opts.adc_method, A.SMOOTHING)


def read_adc_table(path: str) -> pd.DataFrame:
    from .errors import UsageError
    from .io import fs

    if not fs.exists(path):
        raise UsageError(f"--adc: no such ADC table {path}")
    p = fs.join(path, "adc") if fs.isdir(fs.join(path, "adc")) else path
    try:
        table = pd.read_csv(fs.local_path(p)) if str(p).endswith(".csv") else fs.read_parquet(p)
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"--adc: cannot read {path}: {str(exc).splitlines()[0]}") from None
    missing = {"position", "method", "coefficient"} - set(table.columns)
    if missing:
        raise UsageError(f"--adc: table {path} lacks column(s) {sorted(missing)}")
    return table


def adc_based_rows(stats, policies: list, wanted: list, ctx: Context, derived=()) -> list[dict]:
    """Factored (any target) and re-ordering (targets that re-order the logged ads) from the factored tables."""
    from .estimators import factored as F
    from .estimators import propagate as P
    from .estimators import reordering as R
    from .estimators.intervals import clt_or_none

    opts = ctx.options
    pe = stats.table("policy_events")
    if ctx.C is None and ctx.adc_reason is None:
        resolve_adc(stats, ctx)
    out = []
    fac, fsq, tp, ap = (stats.table(n) for n in ("factored", "factored_sq", "target_placements", "ad_position"))
    T_a = F.ad_impressions(ap) if len(ap) else pd.Series(dtype=float)
    strata = F.stratum_weights(ap)
    extra = {"adc_source": ctx.adc_source, "adc_method": opts.adc_method}
    strata_note = (None if strata is None else
                   f"ads partitioned by the calibration key into {strata.attrs['strata']} eligibility strata: "
                   f"V = sum_s (T_s/T) V_s")
    for p in policies:
        rec = pe[pe["policy_id"] == p]
        n = int(rec["n_events"].sum()) if len(rec) else 0
        f_p = fac[fac["policy_id"] == p] if len(fac) else fac
        q_p = fsq[fsq["policy_id"] == p] if len(fsq) else fsq
        reorders = len(rec) and int(rec["n_reorder"].sum()) == n and n > 0
        if "factored" in wanted and p not in derived and reorders:
            out.append(not_identified(p, "factored", "the target re-orders the logged ads event by event: its choice "
                                                     "depends on the logged slate, not on the context alone as the "
                                                     "factored estimator needs (see reorder)", n, opts.level, **extra))
        elif "factored" in wanted and p not in derived:
            if ctx.C is None:
                out.append(not_identified(p, "factored", ctx.adc_reason, n, opts.level, **extra))
            else:
                est = F.factored_estimate(f_p, q_p, T_a, ctx.C, tp[tp["policy_id"] == p] if len(tp) else None,
                                          opts.level, weights=strata)
                se = math.sqrt(P.factored_variance(f_p, q_p, T_a, ctx.C, est["std_error"] ** 2,
                                                   ctx.adc_influence, ctx.C_se, weights=strata))
                lo, hi, kind, why = clt_or_none(est["value"], se, opts.level)
                out.append(row(p, "factored", est["value"], se, lo, hi, kind, n, opts.level, reason=why,
                               supported_share=est["supported_share"],
                               unsupported_share=est["unsupported_share"], note=strata_note, **extra))
        if "reorder" in wanted:
            if not reorders:
                if p in derived or "reorder" in (opts.estimators or []):
                    out.append(not_identified(p, "reorder", "the target does not re-order the logged ads on every "
                                                            "event", n, opts.level, **extra))
                continue
            if ctx.C is None:
                out.append(not_identified(p, "reorder", ctx.adc_reason, n, opts.level, **extra))
                continue
            est = R.reorder_estimate(f_p, q_p, ap, ctx.C, n, opts.level)
            var_v, var_l = P.reorder_variances(f_p, q_p, ap, ctx.C, n, est, ctx.adc_influence, ctx.C_se)
            for name, value, se, note in (
                    ("reorder", est["value"], math.sqrt(var_v), f"unnormalized V(h_pi)={est['total']:.6g} clicks"),
                    ("reorder_lift", est["lift"], math.sqrt(var_l),
                     "expected clicks under the new order per logged click")):
                lo, hi, kind, why = clt_or_none(value, se, opts.level)
                out.append(row(p, name, value, se, lo, hi, kind, n, opts.level, reason=why, supported_share=1.0,
                               unsupported_share=0.0, note=note, **extra))
    return out
