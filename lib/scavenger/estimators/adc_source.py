"""The ADC vector the factored and re-ordering estimates of a run use (seed 001 section 4): the attention-decay
coefficients with their identification, estimated from the window's own logs or read from a stored ADC table
(``--adc``), with what the variance needs (the estimated ADC's linearisation, estimators/propagate.py)."""
from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np
import pandas as pd


ADC_HINT = "pass --adc with an ADC table estimated from ranked logs"


@dataclass
class AdcContext:
    """The ADC vector the factored and re-ordering estimates of a run use (:func:`resolve_adc`)."""

    options: object
    adc_table: pd.DataFrame | None = None
    C: np.ndarray | None = None
    C_se: np.ndarray | None = None
    adc_influence: pd.DataFrame | None = None   # the estimated ADC's linearisation (estimators/propagate.influence)
    adc_source: str | None = None
    adc_reason: str | None = None


def adc_identification(ad_position: pd.DataFrame) -> dict:
    """{position: reason} for the positions i > 1 whose ADC the data cannot identify: no ad was shown at both
    position 1 and position i (in slotted logs each ad is shown at one position only, so any ratio compares
    different ads)."""
    from .attention_decay import rewarded

    if not len(ad_position):
        return {}
    shown, positions = _shown(ad_position, rewarded(ad_position)["m"])
    out = {}
    if 1 not in positions:
        return {int(p): "no ad was shown at position 1, the reference of every ADC" for p in positions}
    at_1 = shown[:, positions.index(1)]
    # whether some ad was shown at two positions (with a reward known), and (without) whether any moved at all
    shared = int((shown.sum(axis=1) > 1).sum())
    alone = None
    if shared == 0:
        alone = ("ADCs are not identifiable: no slot reward is known where an ad was shown at more than one position "
                 "(rows with a slate_reward and null slot rewards); the ADCs need per-slot rewards"
                 if _moved(ad_position) else "ADCs are not identifiable: no ad was shown at more than one position")
    columns = {c: i for i, c in enumerate(positions)}
    for p in range(2, int(max(positions)) + 1):
        if p not in columns:
            out[p] = f"not identifiable: no impressions at position {p} in the window"
            continue
        both = int((at_1 & shown[:, columns[p]]).sum())
        if both == 0:
            out[int(p)] = alone if shared == 0 else f"not identifiable: no ad was shown at both position 1 and {p}"
    return out


def _moved(ad_position: pd.DataFrame) -> bool:
    """Whether some ad was shown at more than one position (its impressions, a reward known or not)."""
    return bool((_shown(ad_position, ad_position["m"])[0].sum(axis=1) > 1).any())


def _shown(ad_position: pd.DataFrame, m: pd.Series) -> tuple:
    """(ads x positions: whether the ad's impressions ``m`` there sum above 0, the positions in order), the ads and
    positions of the rows whose ad and position are not null (a group-by of (ad_id, position) unstacked, in
    numpy: once per window)."""
    ads, _ = pd.factorize(ad_position["ad_id"])
    pos, values = pd.factorize(ad_position["position"], sort=True)
    ok = (ads >= 0) & (pos >= 0)
    used = np.unique(pos[ok])                              # positions some row holds with an ad
    cols = np.searchsorted(used, pos[ok])
    n_ads = int(ads[ok].max()) + 1 if ok.any() else 0
    w = pd.to_numeric(m, errors="coerce").to_numpy(float)[ok]
    sums = np.bincount(ads[ok] * len(used) + cols, weights=np.where(np.isnan(w), 0.0, w),    # a null adds 0
                       minlength=n_ads * len(used)).reshape(n_ads, len(used))
    present = np.bincount(ads[ok], minlength=n_ads) > 0    # an ad all of whose rows lack a position is no row
    return sums[present] > 0, [values[i].item() if hasattr(values[i], "item") else values[i] for i in used]


def adc_rows(stats, methods, level: float, dcg_base: float, smoothing: float, full: bool = True) -> pd.DataFrame:
    """The ADC table with identification: rows the data cannot identify carry NaN and the reason; an identified row
    without an interval (width 0: no variation in its rewards) the reason for that. ``full=False``: the coefficients
    and delta standard errors only (no bootstrap rows, no notes), what a window whose ADC table is not written
    reads (:func:`resolve_adc`)."""
    from . import attention_decay as A

    ap = stats.table("ad_position")
    table = A.adc_table(ap, methods, level, dcg_base, smoothing, bootstrap=full)
    reasons = adc_identification(ap)
    table["identified"] = [int(p) not in reasons for p in table["position"]]
    table["reason"] = [reasons.get(int(p)) for p in table["position"]]
    # a ratio whose position-1 rewards among the ads it uses (naive: all) sum to 0 or less has no value either: no
    # clicks there, or rewards that may be negative (a revenue of -1) summing to a denominator <= 0
    undefined = table["identified"] & ~np.isfinite(table["coefficient"].astype(float))
    table.loc[undefined, "identified"] = False
    table.loc[undefined, "reason"] = [f"not identifiable: the rewards at position 1 of the ads shown at both "
                                      f"position 1 and {int(p)} sum to 0 or less (no clicks there), so the ratio "
                                      f"C_{int(p)} has no positive denominator"
                                      for p in table.loc[undefined, "position"]]
    bad = ~table["identified"]
    for c in ("coefficient", "std_error", "ci_low", "ci_high"):
        table.loc[bad, c] = math.nan
    if not full:
        return table
    # an identified C_i whose interval would have width 0 has none (estimators/attention_decay._interval): say why
    flat = table["identified"] & (table["position"] > 1) & (table["std_error"] == 0) & table["ci_low"].isna()
    table.loc[flat, "reason"] = [
        f"no interval: the rewards at position {int(p)} (and at 1, which the ratio weighs by C_{int(p)}) show no "
        f"variation among the ads used (all 0 or all 1, e.g. no click at position {int(p)}), so the variance is 0 "
        f"and an interval of width 0 would claim certainty; more impressions (clicks) at position {int(p)} give one"
        for p in table.loc[flat, "position"]]
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
    unknown = A.unknown_rewards(ap)
    if unknown:   # said on every row: the CTRs of every method divide by the impressions with a known reward
        left = f"{unknown} slot impression(s) with a null reward (the row has a slate_reward) left out"
        table["note"] = [left if not isinstance(n, str) else f"{n}; {left}" for n in table["note"]]
    return table


def resolve_adc(stats, ctx: AdcContext) -> None:
    """The ADC vector C_1..C_K factored and reorder use: estimated from the window, or a stored ADC table."""
    from . import attention_decay as A
    from . import propagate as P

    opts = ctx.options
    if opts.adc in (None, "", "estimate"):
        # a --by-day window or a running/ prefix writes no ADC table: the method used, its coefficients and delta
        # standard errors only (the same C and C_se), in a fraction of the time
        keep = getattr(opts, "keeps_side", True) or opts.adc_method not in A.METHODS
        ctx.adc_source = "estimated"
        why = None if keep else _none_identified(stats)
        if why:          # no ADC to estimate (the window's table would say why): the same reason, no table
            ctx.adc_reason = f"{why}; {ADC_HINT}"
            return
        ctx.adc_table = adc_rows(stats, A.METHODS if keep else (opts.adc_method,), opts.level, opts.dcg_base,
                                 A.SMOOTHING, full=keep)
    else:
        ctx.adc_table = read_adc_table(opts.adc)
        ctx.adc_source = str(opts.adc)
    sub = ctx.adc_table[(ctx.adc_table["method"] == opts.adc_method)]
    if "interval_kind" in sub.columns:
        sub = sub[sub["interval_kind"].isin(["delta", "crossfit", "none",
                                             sub["interval_kind"].iloc[0] if len(sub) else ""])]
    # a stored table may cover more positions than the logs show (a target placing ads beyond them: factored, which
    # says which it lacks); the logged positions 1..K must all have a positive coefficient
    K = max(stats.K, 1)
    K_all = max(K, int(np.nan_to_num(pd.to_numeric(sub["position"], errors="coerce").max())) if len(sub) else K)
    C = A.adc_vector(sub, opts.adc_method, K_all) if len(sub) else np.full(K, np.nan)
    C[K:][~(C[K:] > 0)] = np.nan
    if not np.all(np.isfinite(C[:K])) or np.any(C[:K] <= 0):
        reasons = sub[sub.get("identified", True) == False]["reason"].dropna().unique().tolist() \
            if "identified" in sub.columns else []  # noqa: E712
        ctx.adc_reason = (reasons[0] if reasons else f"the ADC vector has missing or non-positive coefficients "
                                                      f"{np.round(C[:K], 4).tolist()}") + \
            f"; {ADC_HINT}"
        ctx.C = None
        return
    ctx.C = C
    se = sub.drop_duplicates("position").sort_values("position")["std_error"].to_numpy(float) \
        if "std_error" in sub.columns else None
    ctx.C_se = se if se is not None and len(se) == len(C) else None
    if ctx.adc_source == "estimated":   # same impressions: the joint delta method (estimators/propagate.py)
        ctx.adc_influence = P.influence(stats.table("ad_position"), opts.adc_method, A.SMOOTHING)


def _none_identified(stats) -> str | None:
    """The reason no ADC of positions 2..K is identified where the logs show every position 1..K (slotted logs: each
    ad at one position), as the ADC table would give it for position 2; None otherwise (the table is needed)."""
    ap, K = stats.table("ad_position"), max(stats.K, 1)
    shown = pd.to_numeric(ap["position"], errors="coerce").dropna() if len(ap) else pd.Series(dtype=float)
    if K < 2 or set(shown.astype(int)) != set(range(1, K + 1)):
        return None
    reasons = adc_identification(ap)
    return reasons[2] if all(p in reasons for p in range(2, K + 1)) else None


def read_adc_table(path: str) -> pd.DataFrame:
    from ..errors import UsageError
    from ..io import fs

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
    from .adc_table import check_adc_table

    check_adc_table(table, path)            # values: positions, coefficients, duplicates (exit 2 naming them)
    return table


def adc_context(stats, options) -> AdcContext:
    """The run's ADC (cached per window or day; the table used goes to ``options.side["adc"]``)."""
    def resolve():
        ctx = AdcContext(options=options)
        resolve_adc(stats, ctx)
        return ctx

    ctx = options.cached("adc", resolve)
    options.side["adc"] = ctx.adc_table
    return ctx
