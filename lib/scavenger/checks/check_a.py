"""Check a, context independence (seed 001 section 3, Theorem 1 / Theorem 3 condition (2)): per logging policy and
position, the contingency table of each context feature value x logged ad; chi-square + bias-corrected Cramer's V.
A feature that partitions the ads (each ad under one value: OBD's campaign) selects the eligible ads, not the
exploration: the other features are tested within its strata. Dependence on the day (history) is allowed by
Theorem 3: shown, never failed, and a window's tables are tested within each day (summed chi-squares, pooled V).
A table fails when V_bc > cramers_v_max and the chi-square p-value is below independence_alpha / (tables tested);
it cannot be judged (warn) below min_table_n impressions or below min_per_level impressions per feature value and
per ad on average."""
from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from .codes import Codes, dense, group_sum, keep_rows, spread
from .verdict import FAIL, PASS, WARN, AssumptionConfig, row

CHECK = "a.context_independence"
SPARSE_ROWS = 20    # a (policy, position) with more features too sparse to judge reports them as one row


def check_a(ctx: pd.DataFrame, slot: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Context independence per (policy, position, feature); time dependence shown without failing."""
    codes = Codes(ctx)                  # each column of ctx factorized once, for every group-by below
    partitions = _partitioning_features(ctx, codes)
    keys = ["logging_policy", "position", "feature"]
    # every group's chi-square at once, from its non-zero cells (and within a partitioning feature's strata): the
    # loop below does no pandas work per group (bounded cost for any number of policies and features)
    per = _within_days(ctx, keys, codes) if len(ctx) else None
    within = _within_partitions(ctx, keys, partitions)
    days = "dt" in ctx.columns and codes.size("dt") > 1
    # Bonferroni over the tables with a context value to depend on (as check e): an independent logger fails
    # check a with probability at most independence_alpha however many features and positions
    tested = int((per["r"] >= 2).sum()) if per is not None else 0
    p_cut = cfg.independence_alpha / max(tested, 1)
    varies = set(per.index[per["r"] >= 2].droplevel("feature")) if per is not None else set()
    out, per = _sparse_rows(per, partitions, varies, cfg)
    stats = per.to_dict("index") if per is not None else {}
    for (policy, pos, feat) in sorted(stats):     # after the sparse features' rows (``out``)
        scope = f"policy={policy} position={pos}"
        part = partitions.get((policy, pos))
        if part is not None and feat in part["features"]:
            out.append(row(CHECK, f"{scope} feature={feat}", None, cfg.cramers_v_max, PASS,
                           f"{feat} partitions the ads (each ad is shown under one {feat} value only): it selects "
                           f"the eligible ads, not the exploration; the other features are tested within its "
                           f"{part['n_strata']} strata"))
        elif part is not None:
            out.append(_within_partition(within.get((policy, pos, feat)), part, feat, f"{scope} feature={feat}",
                                         p_cut, days, cfg))
        else:
            out.append(_feature_row(stats[(policy, pos, feat)], feat, f"{scope} feature={feat}", p_cut,
                                    (policy, pos) in varies, cfg))
    return out + _time_rows(slot)


def _within_days(ctx: pd.DataFrame, keys: list, codes: Codes | None = None) -> pd.DataFrame:
    """The chi-square statistics of value x ad per group of ``keys`` (the index), within each day (``dt``): a window's
    days are strata, so a feature that changes with the day (a weekday) while the logger changes too (history,
    allowed by seed 001 Theorem 3) is no context dependence. One day: :func:`.vector.sparse_chi2` of the table.
    Several: :func:`.vector.pooled_chi2` over the days (``days`` of them)."""
    from .vector import pooled_chi2, sparse_chi2

    codes = codes or Codes(ctx)
    one = "dt" not in ctx.columns or codes.size("dt") + bool((codes("dt")[0] < 0).any()) <= 1   # nunique(dropna=False)
    # the merged context_cells hold one row per (dt, keys, value, ad): a window's cells need no summing first
    per = sparse_chi2(ctx, keys if one else keys + ["dt"], "value", "ad_id", unique=not one, codes=codes)
    if one:
        return per.assign(levels=per[["r", "c"]].max(axis=1))
    return pooled_chi2(per, keys).assign(days=lambda f: f["parts"])


def _sparse_rows(per: pd.DataFrame | None, partitions: dict, varies: set, cfg: AssumptionConfig) -> tuple:
    """(rows, the other groups of ``per``): a (policy, position) without a partitioning feature whose features
    with fewer than min_table_n impressions are more than SPARSE_ROWS (a context of many keys, a row of 100,000)
    reports them as one row: none can fail (too few impressions), and one verdict row each made a million rows to
    compute, judge and summarize. Its verdict is that of its worst feature: WARN when one cannot be judged, PASS
    when each has one value and other features vary (the rows of :func:`_feature_row`)."""
    if per is None or not len(per):
        return [], per
    thin = (per["n"] < cfg.min_table_n).to_numpy()
    pp = per.index.droplevel("feature")
    counts = pp[thin].value_counts()
    many = [k for k in counts.index[counts > SPARSE_ROWS] if partitions.get(k) is None]
    if not many:
        return [], per
    out, gone = [], np.zeros(len(per), dtype=bool)
    for policy, pos in sorted(many):
        mask = thin & pp.isin([(policy, pos)])
        gone |= mask
        group = per[mask]
        one_value = int((group["r"] < 2).sum())
        judged = one_value if (policy, pos) in varies else 0
        names = ", ".join(heapq.nsmallest(5, map(str, group.index.get_level_values("feature"))))
        verdict = PASS if judged == len(group) else WARN
        out.append(row(CHECK, f"policy={policy} position={pos} features={len(group)} sparse", None,
                       cfg.cramers_v_max, verdict,
                       f"{len(group)} features have fewer than {cfg.min_table_n} impressions each (e.g. {names}): "
                       f"too few to show a dependence of the logged ad, so none can fail; {len(group) - judged} "
                       f"cannot be judged, {judged} have one value where other features vary. Reported as one row "
                       f"(more than {SPARSE_ROWS}); widen the window or log fewer context keys"))
    return out, per[~gone]


def _within_partitions(ctx: pd.DataFrame, keys: list, partitions: dict) -> dict:
    """{group: pooled statistics} of value x ad within the strata of each (policy, position)'s partitioning
    feature, and within each day: :func:`.vector.pooled_chi2` over the (stratum, day) tables, every group at
    once."""
    from .vector import pooled_chi2, sparse_chi2

    if not partitions or not len(ctx):
        return {}
    strata = pd.concat([pd.DataFrame({"logging_policy": policy, "position": pos, "ad_id": part["stratum_of_ad"].index,
                                      "_stratum": part["stratum_of_ad"].to_numpy()})
                        for (policy, pos), part in partitions.items()], ignore_index=True)
    cells = ctx.merge(strata.astype({"position": ctx["position"].dtype}), on=["logging_policy", "position", "ad_id"])
    levels = keys + ["_stratum"] + (["dt"] if "dt" in cells.columns else [])
    return pooled_chi2(sparse_chi2(cells, levels, "value", "ad_id"), keys).to_dict("index")


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


def _within_partition(st: dict | None, part: dict, feat: str, scope: str, p_cut: float, days: bool,
                      cfg: AssumptionConfig) -> dict:
    """A feature tested within the strata of the policy's partitioning feature, and within each day of a window
    (pooled V of :func:`_within_partitions`)."""
    st = st or {"v_bc": 0.0, "strata": 0, "chi2": 0.0, "dof": 0, "p_value": 1.0, "n": 0.0, "n_tested": 0.0,
                "levels": 0, "r": 0}
    by = part["features"][0] + (" value and day" if days else "")
    if st["strata"] == 0 and st["n"] >= cfg.min_table_n:
        return row(CHECK, scope, 0.0, cfg.cramers_v_max, PASS,
                   f"no {by} holds two values of {feat} and two ads in these {st['n']:.0f} impressions: within an "
                   f"eligible set the logged ad cannot depend on {feat}")
    detail = (f"within-{part['features'][0]} pooled Cramer's V={st['v_bc']:.4f} (bias-corrected) over "
              f"{st['strata']} strata (each {by}), chi2={st['chi2']:.1f}, dof={st['dof']}, "
              f"p={st['p_value']:.3g}, n={st['n']:.0f}")
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


def _partitioning_features(ctx: pd.DataFrame, codes: Codes | None = None) -> dict:
    """Per (policy, position): features with >= 2 values under which every ad appears with one value only (e.g.
    OBD's campaign: ad ids are per campaign), one value holding two ads or more (an eligible set to explore: one ad
    per value is a logger that picks the ad from the feature). They define eligible sets, not exploration; the
    stratum of an ad is its value of the first such feature (by name). Only a feature seen with every ad of its
    (policy, position) and with >= 20 impressions per ad on average: a sparse table (ads seen a handful of times),
    or a key on a few events, looks like a partition by chance. Integer codes and
    bincounts only, no loop per feature (a row of 100,000 context keys makes 400,000 groups)."""
    if not len(ctx):
        return {}
    codes = codes or Codes(ctx)
    names = ("logging_policy", "position", "feature", "ad_id", "value")
    # policies and positions in sorted order (that of the result), features, ads and values as first seen
    pol, pos, feat, ad, val, n, at = keep_rows((codes(names[0])[0] >= 0) & (codes(names[1])[0] >= 0),
                                               [codes(c, sort=c in names[:2])[0] for c in names]
                                               + [ctx["n"].to_numpy(), np.arange(len(ctx))])
    pp, npp = dense([pol, pos], [codes.size(names[0]), codes.size(names[1])])         # (policy, position)
    pol_of, pos_of = spread(pp, npp, pol), spread(pp, npp, pos)
    n_ads = _distinct(pp[ad >= 0], npp, ad[ad >= 0], codes.size("ad_id"))
    pp, feat, ad, val, n, at = keep_rows(feat >= 0, [pp, feat, ad, val, n, at])
    pf, npf = dense([pp, feat], [npp, codes.size("feature")])                          # (policy, position, feature)
    pp_of, feat_of = spread(pf, npf, pp), spread(pf, npf, feat)
    # dense: the feature itself has >= 20 impressions per ad of its (policy, position) and is seen with every one
    # of them (a key on a few events sees a few ads, each under one value: no partition of the ads)
    seen = ad >= 0
    wide = (group_sum(pf, n, npf) >= 20 * n_ads[pp_of]) & \
        (_distinct(pf[seen], npf, ad[seen], codes.size("ad_id")) >= n_ads[pp_of])
    pf, ad, val, at = keep_rows(wide[pf], [pf, ad, val, at])
    # a null ad or value is a value of its own (code 0), as drop_duplicates has it
    values, parts = _partition_flags(pf, npf, ad + 1, codes.size("ad_id") + 1, val + 1, codes.size("value") + 1)
    hits = np.flatnonzero(parts)
    if not len(hits):
        return {}
    out = {}
    for q in np.unique(pp_of[hits]):                            # (policy, position) in sorted order
        named = {codes("feature")[1][feat_of[f]]: f for f in hits[pp_of[hits] == q]}
        feats = sorted(named)
        out[(codes(names[0], sort=True)[1][pol_of[q]], codes(names[1], sort=True)[1][pos_of[q]])] = {
            "features": feats, "n_strata": int(values[named[feats[0]]]), "first": named[feats[0]]}
    _strata_of_ads(ctx, out, pf, ad, at)
    return out


def _distinct(f: np.ndarray, nf: int, x: np.ndarray, nx: int) -> np.ndarray:
    """Per code f (0..nf-1): how many distinct x."""
    fx, nfx = dense([f, x], [nf, nx])
    return np.bincount(spread(fx, nfx, f), minlength=nf)


def _strata_of_ads(ctx: pd.DataFrame, out: dict, pf: np.ndarray, ad: np.ndarray, at: np.ndarray) -> None:
    """Each (policy, position)'s ``stratum_of_ad`` (replacing its "first", the code of its first partitioning
    feature): every ad's value of that feature at the ad's first row (ctx order, a null ad one of them)."""
    chosen = np.zeros(int(pf.max()) + 1, dtype=bool)
    chosen[[part["first"] for part in out.values()]] = True
    rows = np.flatnonzero(chosen[pf])
    first = rows[np.sort(np.unique(pf[rows] * (int(ad.max()) + 2) + ad[rows] + 1, return_index=True)[1])]
    values, ads = ctx["value"].to_numpy()[at[first]], ctx["ad_id"].to_numpy()[at[first]]
    for part in out.values():
        mine = pf[first] == part.pop("first")
        part["stratum_of_ad"] = pd.Series(values[mine], index=pd.Index(ads[mine], name="ad_id"), name="value")


def _partition_flags(ppf: np.ndarray, nppf: int, ad: np.ndarray, na: int, val: np.ndarray,
                     nv: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (policy, position, feature) code, over its distinct (ad, value) pairs (0 = null): the distinct non-null
    values, and whether it partitions: >= 2 values, each non-null ad under one value (a null one counts), a
    non-null value with >= 2 ads (a null ad counts)."""
    t, nt = dense([ppf, ad, val], [nppf, na, nv])
    f_t, a_t, v_t = spread(t, nt, ppf), spread(t, nt, ad), spread(t, nt, val)
    per_ad, _ = _most_and_distinct(f_t[a_t > 0], a_t[a_t > 0], nppf, na)
    per_value, values = _most_and_distinct(f_t[v_t > 0], v_t[v_t > 0], nppf, nv)
    return values, (values >= 2) & (per_ad == 1) & (per_value >= 2)


def _most_and_distinct(f: np.ndarray, x: np.ndarray, nf: int, nx: int) -> tuple[np.ndarray, np.ndarray]:
    """Per code f (0..nf-1): the most rows of one x, and how many distinct x."""
    fx, nfx = dense([f, x], [nf, nx])
    f_of = spread(fx, nfx, f)
    most = np.zeros(nf, dtype=np.int64)
    np.maximum.at(most, f_of, np.bincount(fx, minlength=nfx))
    return most, np.bincount(f_of, minlength=nf)
