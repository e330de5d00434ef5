"""Check a, context independence (seed 001 section 3, Theorem 1 / Theorem 3 condition (2)): per logging policy and
position, the contingency table of each context feature value x logged ad; chi-square + bias-corrected Cramer's V.
A feature that partitions the ads (each ad under one value: OBD's campaign) selects the eligible ads, not the
exploration: the other features are tested within its strata. Dependence on the day (history) is allowed by
Theorem 3: shown, never failed."""
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
    stats = sparse_chi2(ctx, keys, "value", "ad_id").to_dict("index") if len(ctx) else {}
    rows_of = ctx.groupby(keys, sort=True).indices if len(ctx) else {}
    for (policy, pos, feat) in sorted(rows_of):
        scope = f"policy={policy} position={pos} feature={feat}"
        part = partitions.get((policy, pos))
        if part is not None and feat in part["features"]:
            out.append(row(CHECK, scope, None, cfg.cramers_v_max, PASS,
                           f"{feat} partitions the ads (each ad is shown under one {feat} value only): it selects "
                           f"the eligible ads, not the exploration; the other features are tested within its "
                           f"{part['n_strata']} strata"))
        elif part is not None:
            out.append(_within_partition(ctx.iloc[rows_of[(policy, pos, feat)]], part, scope, cfg))
        else:
            out.append(_feature_row(stats[(policy, pos, feat)], feat, scope, cfg))
    return out + _time_rows(slot)


def _within_partition(g: pd.DataFrame, part: dict, scope: str, cfg: AssumptionConfig) -> dict:
    """A feature tested within the strata of the policy's partitioning feature (pooled V, see pooled_within)."""
    st = pooled_within(g.assign(_stratum=g["ad_id"].map(part["stratum_of_ad"])), "_stratum")
    detail = (f"within-{part['features'][0]} pooled Cramer's V={st['v_bc']:.4f} (bias-corrected) over "
              f"{st['strata']} strata, chi2={st['chi2']:.1f}, dof={st['dof']}, n={st['n']:.0f}")
    verdict = (WARN if st["n"] < cfg.min_table_n else FAIL if st["v_bc"] > cfg.cramers_v_max else PASS)
    msg = detail + {PASS: ": no material dependence within the eligible sets",
                    WARN: ": too few impressions to judge",
                    FAIL: ": the logged ad depends on the current context within an eligible set, so "
                          "scavenging/ADC estimates are not consistent (seed 001 Theorem 1)"}[verdict]
    return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, verdict, msg)


def _feature_row(st: dict, feat: str, scope: str, cfg: AssumptionConfig) -> dict:
    """The verdict of one feature x ad table from its chi-square and V (:func:`.vector.sparse_chi2`)."""
    levels = st["r"]
    if levels > cfg.max_feature_levels:
        return row(CHECK, scope, None, cfg.cramers_v_max, WARN,
                   f"{levels} levels > {cfg.max_feature_levels}: not tested; bucket the feature or raise "
                   f"max_feature_levels")
    detail = (f"Cramer's V={st['v_bc']:.4f} (bias-corrected; raw {st['v']:.4f}), chi2={st['chi2']:.1f}, "
              f"dof={st['dof']}, p={st['p_value']:.3g}, n={st['n']:.0f}")
    if st["r"] < 2:
        return row(CHECK, scope, 0.0, cfg.cramers_v_max, PASS,
                   f"feature {feat} has one value here: nothing to depend on")
    if st["n"] < cfg.min_table_n:
        return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, WARN,
                   f"{detail}: fewer than {cfg.min_table_n} impressions, cannot judge; widen the window")
    if st["v_bc"] > cfg.cramers_v_max:
        return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, FAIL,
                   f"{detail}: the logged ad depends on the current context, so scavenging and ADC "
                   f"estimates are not consistent (seed 001 Theorem 1); use a context-independent "
                   f"exploration policy (or only its exploration events) for these estimators")
    return row(CHECK, scope, st["v_bc"], cfg.cramers_v_max, PASS,
               f"{detail}: no material dependence of the logged ad on {feat}")


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
