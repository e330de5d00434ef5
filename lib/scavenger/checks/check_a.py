"""Check a, context independence (seed 001 section 3, Theorem 1 / Theorem 3 condition (2)): per logging policy and
position, the contingency table of each context feature value x logged ad; chi-square + bias-corrected Cramer's V.
A feature that partitions the ads (each ad under one value: OBD's campaign) selects the eligible ads, not the
exploration: the other features are tested within its strata. Dependence on the day (history) is allowed by
Theorem 3: shown, never failed, and a window's tables are tested within each day (summed chi-squares, pooled V).
A table fails when V_bc > cramers_v_max and the chi-square p-value is below independence_alpha / (tables tested);
it cannot be judged (warn) below min_table_n impressions or below min_per_level impressions per feature value and
per ad on average."""
from __future__ import annotations

import pandas as pd

from .contingency import pooled_within
from .verdict import FAIL, PASS, WARN, AssumptionConfig, row

CHECK = "a.context_independence"


def check_a(ctx: pd.DataFrame, slot: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Context independence per (policy, position, feature); time dependence shown without failing."""
    from .vector import sparse_chi2

    out = []
    partitions = _partitioning_features(ctx)
    keys = ["logging_policy", "position", "feature"]
    # every group's chi-square at once, from its non-zero cells: the loop below does no pandas work per group
    # except for the few that a partitioning feature splits (bounded cost for any number of policies/features)
    stats = _within_days(ctx, keys) if len(ctx) else {}
    rows_of = ctx.groupby(keys, sort=True).indices if len(ctx) else {}
    # Bonferroni over the tables with a context value to depend on (as check e): an independent logger fails
    # check a with probability at most independence_alpha however many features and positions
    tested = sum(1 for st in stats.values() if st["r"] >= 2) if stats else 0
    p_cut = cfg.independence_alpha / max(tested, 1)
    varies = {(p, k) for (p, k, _), st in stats.items() if st["r"] >= 2}
    for (policy, pos, feat) in sorted(rows_of):
        scope = f"policy={policy} position={pos}"
        part = partitions.get((policy, pos))
        if part is not None and feat in part["features"]:
            out.append(row(CHECK, f"{scope} feature={feat}", None, cfg.cramers_v_max, PASS,
                           f"{feat} partitions the ads (each ad is shown under one {feat} value only): it selects "
                           f"the eligible ads, not the exploration; the other features are tested within its "
                           f"{part['n_strata']} strata"))
        elif part is not None:
            out.append(_within_partition(ctx.iloc[rows_of[(policy, pos, feat)]], part, f"{scope} feature={feat}",
                                         p_cut, cfg))
        else:
            out.append(_feature_row(stats[(policy, pos, feat)], feat, f"{scope} feature={feat}", p_cut,
                                    (policy, pos) in varies, cfg))
    return out + _time_rows(slot)


def _within_days(ctx: pd.DataFrame, keys: list) -> dict:
    """{group: chi-square statistics} of value x ad per group of ``keys``, within each day (``dt``): a window's
    days are strata, so a feature that changes with the day (a weekday) while the logger changes too (history,
    allowed by seed 001 Theorem 3) is no context dependence. One day: :func:`.vector.sparse_chi2` of the table.
    Several: chi2 and dof summed over the days, p of the sum, the pooled bias-corrected V of
    :func:`.contingency.pooled_within` (sqrt(max(0, sum chi2_d - sum dof_d n_d / (n_d - 1)) / sum n_d
    min(r_d - 1, c_d - 1))), r and c the most values and ads of one day, ``levels`` = sum_d max(r_d, c_d)."""
    from ..estimators.distributions import chi2_sf
    from .vector import sparse_chi2

    one = "dt" not in ctx.columns or ctx["dt"].nunique(dropna=False) <= 1
    per = sparse_chi2(ctx, keys if one else keys + ["dt"], "value", "ad_id")
    if one:
        per["levels"] = per[["r", "c"]].max(axis=1)
        return per.to_dict("index")
    ok = (per["r"] >= 2) & (per["c"] >= 2)
    nn = per["n"].astype(float)
    frame = pd.DataFrame({
        "chi2": per["chi2"].where(ok, 0.0), "dof": per["dof"].where(ok, 0), "n": nn,
        "e0": (per["dof"] * nn / (nn - 1)).where(ok & (nn > 1), 0.0),
        "den": (nn * (per[["r", "c"]].min(axis=1) - 1)).where(ok, 0.0),
        "levels": per[["r", "c"]].max(axis=1).where(ok, 0), "r": per["r"], "c": per["c"],
        "days": 1}, index=per.index)
    g = frame.groupby(level=list(range(len(keys))), sort=True)
    out = g[["chi2", "dof", "n", "e0", "den", "levels", "days"]].sum()
    out[["r", "c"]] = g[["r", "c"]].max()
    out["v_bc"] = (((out["chi2"] - out["e0"]).clip(lower=0.0) / out["den"].where(out["den"] > 0)) ** 0.5).fillna(0.0)
    out["v"] = ((out["chi2"] / out["den"].where(out["den"] > 0)) ** 0.5).fillna(0.0)
    out["p_value"] = [float(chi2_sf(x, d)) if d > 0 else 1.0 for x, d in zip(out["chi2"], out["dof"])]
    out["dof"] = out["dof"].astype(int)
    return out.to_dict("index")


def _verdict(v_bc: float, p: float, n: float, levels: float, p_cut: float, cfg: AssumptionConfig) -> str:
    """WARN when the table cannot be judged (fewer than min_table_n impressions, or fewer than min_per_level per
    feature value or per ad on average: too sparse for the chi-square), FAIL when V_bc > cramers_v_max and the
    chi-square p-value < p_cut (material and significant), else PASS."""
    if n < cfg.min_table_n or n < cfg.min_per_level * levels:
        return WARN
    return FAIL if v_bc > cfg.cramers_v_max and p < p_cut else PASS


def _warn_text(n: float, levels: float, cfg: AssumptionConfig) -> str:
    if n < cfg.min_table_n:
        return f": fewer than {cfg.min_table_n} impressions, cannot judge; widen the window"
    return (f": cannot judge, {n:.0f} impressions over {levels:.0f} feature values or ads is fewer than "
            f"{cfg.min_per_level} per value and per ad on average, too sparse for the chi-square (a value seen once "
            f"shows no dependence whatever the logger does); bucket the feature into fewer values or widen the "
            f"window")


def _within_partition(g: pd.DataFrame, part: dict, scope: str, p_cut: float, cfg: AssumptionConfig) -> dict:
    """A feature tested within the strata of the policy's partitioning feature (pooled V, see pooled_within)."""
    st = pooled_within(g.assign(_stratum=g["ad_id"].map(part["stratum_of_ad"])), "_stratum")
    detail = (f"within-{part['features'][0]} pooled Cramer's V={st['v_bc']:.4f} (bias-corrected) over "
              f"{st['strata']} strata, chi2={st['chi2']:.1f}, dof={st['dof']}, p={st['p_value']:.3g}, "
              f"n={st['n']:.0f}")
    n = st["n"] if st["n"] < cfg.min_table_n else st["n_tested"]
    verdict = _verdict(st["v_bc"], st["p_value"], n, st["levels"], p_cut, cfg)
    msg = detail + {PASS: ": no material dependence within the eligible sets",
                    WARN: _warn_text(n, st["levels"], cfg),
                    FAIL: f": the logged ad depends on the current context within an eligible set (p < "
                          f"{p_cut:.2g}), so scavenging/ADC estimates are not consistent (seed 001 Theorem 1)"}[verdict]
    return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, verdict, msg)


def _feature_row(st: dict, feat: str, scope: str, p_cut: float, others_vary: bool, cfg: AssumptionConfig) -> dict:
    """The verdict of one feature x ad table from its chi-square and V (:func:`.vector.sparse_chi2`)."""
    levels = st["r"]
    if levels > cfg.max_feature_levels:
        return row(CHECK, scope, None, cfg.cramers_v_max, WARN,
                   f"{levels} levels > {cfg.max_feature_levels}: not tested; bucket the feature or raise "
                   f"max_feature_levels")
    within = f" within each of {st['days']} days" if st.get("days", 1) > 1 else ""
    detail = (f"Cramer's V={st['v_bc']:.4f} (bias-corrected{within}; raw {st['v']:.4f}), chi2={st['chi2']:.1f}, "
              f"dof={st['dof']}, p={st['p_value']:.3g}, n={st['n']:.0f}")
    if st["r"] < 2 and others_vary:
        return row(CHECK, scope, 0.0, cfg.cramers_v_max, PASS,
                   f"feature {feat} has one value in these {st['n']:.0f} impressions{' on each day' if within else ''}:"
                   f" the logged ad cannot depend on it here; the features that vary are tested in their own rows")
    if st["r"] < 2:
        return row(CHECK, scope, None, cfg.cramers_v_max, WARN,
                   f"cannot judge: no context feature varies in these {st['n']:.0f} impressions (feature {feat} has "
                   f"one value), so the logs cannot show whether the logged ad depends on the context; log the "
                   f"context the serving system sees (context_id, context map) to test it")
    sizes = st["levels"]
    verdict = _verdict(st["v_bc"], st["p_value"], st["n"], sizes, p_cut, cfg)
    if verdict == WARN:
        return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, WARN, detail + _warn_text(st["n"], sizes, cfg))
    if verdict == FAIL:
        return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, FAIL,
                   f"{detail}: the logged ad depends on the current context (V > {cfg.cramers_v_max} and p < "
                   f"{p_cut:.2g}), so scavenging and ADC estimates are not consistent (seed 001 Theorem 1); use a "
                   f"context-independent exploration policy (or only its exploration events) for these estimators")
    return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, PASS,
               f"{detail}: no material dependence of the logged ad on {feat}"
               + ("" if st["v_bc"] <= cfg.cramers_v_max else f" (V > {cfg.cramers_v_max} but p >= {p_cut:.2g}: "
                                                              f"not significant, chance on a sparse table)"))


def _time_rows(slot: pd.DataFrame) -> list[dict]:
    """Time / history dependence, day x ad per (policy, position) seen on two days or more: shown only."""
    from .vector import sparse_chi2

    days = slot.groupby(["logging_policy", "position"])["dt"].nunique()
    days = days[days >= 2]
    time_stats = sparse_chi2(slot[slot.set_index(["logging_policy", "position"]).index.isin(days.index)],
                             ["logging_policy", "position"], "dt", "ad_id").to_dict("index") if len(days) else {}
    out = []
    for (policy, pos), nd in days.items():
        st = time_stats[(policy, pos)]
        out.append(row("a.time_dependence", f"policy={policy} position={pos}", st["v_bc"], None, PASS,
                       f"Cramer's V of day x logged ad = {st['v_bc']:.4f} over {nd} days: dependence on time or "
                       f"history is allowed (seed 001 Theorem 3); shown for information"))
    return out


def _partitioning_features(ctx: pd.DataFrame) -> dict:
    """Per (policy, position): features with >= 2 values under which every ad appears with one value only (e.g.
    OBD's campaign: ad ids are per campaign). They define eligible sets, not exploration; the stratum of an ad is
    its value of the first such feature (by name). Only when ads have >= 20 impressions on average."""
    out = {}
    if not len(ctx):
        return out
    per_feature = ctx.groupby(["logging_policy", "position", "feature"], sort=False)["n"].sum()
    n_pos = per_feature.groupby(level=[0, 1]).max()
    n_ads = ctx.groupby(["logging_policy", "position"], sort=False)["ad_id"].nunique()
    dense = set(n_pos.index[(n_pos >= 20 * n_ads.reindex(n_pos.index)).to_numpy()])
    ctx = ctx[ctx.set_index(["logging_policy", "position"]).index.isin(dense)] if dense else ctx.iloc[:0]
    for (policy, pos), g in ctx.groupby(["logging_policy", "position"], sort=True):
        # a sparse table (ads seen a handful of times) looks like a partition by chance: require >= 20
        # impressions per ad on average before calling a feature an eligibility partition
        n_pos = float(g.groupby("feature")["n"].sum().max())
        if n_pos < 20 * g["ad_id"].nunique():
            continue
        feats = []
        for feat, h in g.groupby("feature", sort=True):
            if h["value"].nunique() >= 2 and int(h.groupby("ad_id")["value"].nunique().max()) == 1:
                feats.append(feat)
        if feats:
            first = g[g["feature"] == feats[0]]
            out[(policy, pos)] = {"features": feats, "n_strata": int(first["value"].nunique()),
                                  "stratum_of_ad": first.drop_duplicates("ad_id").set_index("ad_id")["value"]}
    return out
