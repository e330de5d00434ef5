"""Assumption checks 3a-3e of issue 5: Spark aggregates the clean rows into small tables, pure numpy/scipy
functions turn them into (check, scope, statistic, threshold, verdict, message) rows.

a  context independence  (seed 001 section 3, Theorem 1 / Theorem 3 condition (2)): per logging policy and
   position, contingency table of each context feature value x logged ad; chi-square + bias-corrected Cramer's V.
   Dependence on the day (history) is allowed by Theorem 3: shown, never failed.
b  enough exploration: T_a (impressions of ad a at any position) and M(a, i) per (ad, position) against
   minimums; the share of each target policy's mass on (position, ad) pairs observed fewer than min_m times.
c  support: target mass on (position, ad) pairs the event's logging policy never showed (or only with a
   non-positive propensity).
d  factorized logging (seed 002 section 2: mu(A|X) = prod_k mu_k(A_k|X)): within context strata, slot j's ad vs
   slot k's ad -- a pooled bias-corrected Cramer's V, and a collision test: the number of events showing the
   same ad in both slots against its expectation under the product of the slot marginals (a ranked layout
   samples without replacement, so it never repeats an ad although the marginals overlap).
e  propensity calibration: where the logged propensity of (policy, day, position, ad) is constant (logging
   independent of the input), the observed count M must match n_events * propensity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PASS, WARN, FAIL = "pass", "warn", "fail"
VERDICT_COLUMNS = ["check", "scope", "statistic", "threshold", "verdict", "message"]
_ORDER = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class AssumptionConfig:
    cramers_v_max: float = 0.1          # a: fail above (effect size; p-values are ~0 at scale)
    min_table_n: int = 500              # a, d: fewer impressions -> warn "not enough data to judge"
    include_context_id: bool = True     # a: context_id as one more feature
    max_feature_levels: int = 500       # a: features with more levels are reported, not tested
    min_t: int = 30                     # b: T_a minimum
    min_m: int = 30                     # b: M(a, i) minimum
    rare_mass_max: float = 0.05         # b: target mass on rarely observed (position, ad)
    support_max: float = 0.001          # c: unsupported target mass
    factor_v_max: float = 0.1           # d: pooled within-stratum V
    collision_tol: float = 0.5          # d: fail when |O/E - 1| > tol ...
    min_expected: float = 5.0           # d, e: ... and the expectation E is at least this
    calib_tol: float = 0.1              # e: fail when |O/E - 1| > tol ...
    calib_z: float = 4.0                # e: ... and |z| > calib_z


def row(check, scope, statistic, threshold, verdict, message) -> dict:
    return {"check": check, "scope": scope,
            "statistic": None if statistic is None else float(statistic),
            "threshold": None if threshold is None else float(threshold),
            "verdict": verdict, "message": message}


def worst(verdicts) -> str:
    vs = list(verdicts)
    return max(vs, key=lambda v: _ORDER[v]) if vs else PASS


# ----------------------------------------------------------------------------------------------- pure math
def chi2_cramers_v(table: np.ndarray) -> dict:
    """Pearson chi-square and Cramer's V of an r x c table (empty rows/columns dropped).

    chi2 = sum (O - E)^2 / E, E = R_i C_j / n;  V = sqrt(chi2 / (n min(r-1, c-1)));
    bias-corrected (Bergsma 2013): phi2c = max(0, chi2/n - (r-1)(c-1)/(n-1)), r~ = r - (r-1)^2/(n-1),
    c~ likewise, V_bc = sqrt(phi2c / min(r~-1, c~-1)). Used by check a (seed 001 Theorem 3 condition (2)).
    """
    from scipy.stats import chi2 as chi2_dist

    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0] if t.size else t
    r, c = t.shape if t.ndim == 2 else (0, 0)
    n = float(t.sum()) if t.size else 0.0
    if r < 2 or c < 2 or n < 2:
        return {"chi2": 0.0, "dof": 0, "p_value": 1.0, "v": 0.0, "v_bc": 0.0, "n": n, "r": r, "c": c}
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    dof = (r - 1) * (c - 1)
    v = np.sqrt(chi2 / (n * min(r - 1, c - 1)))
    phi2c = max(0.0, chi2 / n - dof / (n - 1))
    rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    denom = min(rc - 1, cc - 1)
    v_bc = float(np.sqrt(phi2c / denom)) if denom > 0 else 0.0
    return {"chi2": chi2, "dof": dof, "p_value": float(chi2_dist.sf(chi2, dof)), "v": float(v),
            "v_bc": v_bc, "n": n, "r": r, "c": c}


def stratified_dependence(strata: pd.DataFrame) -> dict:
    """Pooled within-stratum dependence of two slots from per-stratum sums (check d).

    Per stratum s: chi2_s = n_s (S_s - 1) with S_s = sum_cells O^2 / (R_a C_b) (the Pearson identity), null
    expectation E0_s = (r_s - 1)(c_s - 1) n_s / (n_s - 1) (exact under fixed margins);
    V_pooled = sqrt(max(0, sum_s (chi2_s - E0_s)) / sum_s n_s min(r_s - 1, c_s - 1)).
    Collisions: O = events with the same ad in both slots, E = sum_s sum_a R_s(a) C_s(a) / n_s (product of the
    slot marginals, seed 002's factorized mu).
    """
    s = strata[(strata["n"] >= 2) & (strata["r"] >= 2) & (strata["c"] >= 2)]
    chi2 = (s["n"] * (s["s"] - 1.0)).clip(lower=0.0)
    e0 = (s["r"] - 1) * (s["c"] - 1) * s["n"] / (s["n"] - 1)
    denom = float((s["n"] * np.minimum(s["r"] - 1, s["c"] - 1)).sum())
    excess = float((chi2 - e0).sum())
    v = float(np.sqrt(max(0.0, excess) / denom)) if denom > 0 else 0.0
    o, e = float(strata["o_diag"].sum()), float(strata["e_diag"].sum())
    return {"chi2": float(chi2.sum()), "dof": float(((s["r"] - 1) * (s["c"] - 1)).sum()), "v_pooled": v,
            "strata": int(len(s)), "n": float(strata["n"].sum()), "collisions_observed": o,
            "collisions_expected": e, "collision_ratio": (o / e) if e > 0 else float("nan")}


def calibration_cells(slot: pd.DataFrame, events: pd.DataFrame, min_expected: float) -> pd.DataFrame:
    """Per (policy, dt, position, ad) with a constant logged propensity p: E = N(policy, dt, position) * p with N
    the slates showing that position, O = M, z = (O - E) / sqrt(E (1 - p)), rel = O / E - 1 (check e; seed 002:
    mu_k must be the true marginals). ``events`` has logging_policy, dt, position, events."""
    cells = slot.merge(events, on=["logging_policy", "dt", "position"], how="left")
    p = cells["sum_p"] / cells["n_p"].where(cells["n_p"] > 0)
    constant = (cells["max_p"] - cells["min_p"]).abs() <= 1e-9 * cells["max_p"].abs().clip(lower=1e-300)
    cells = cells.assign(p=p, constant=constant & p.notna())
    cells["expected"] = cells["events"] * cells["p"]
    var = cells["expected"] * (1.0 - cells["p"]).clip(lower=0.0)
    cells["z"] = (cells["n"] - cells["expected"]) / np.sqrt(var.where(var > 0))
    cells["rel"] = cells["n"] / cells["expected"] - 1.0
    cells["testable"] = cells["constant"] & (cells["expected"] >= min_expected)
    return cells


# ---------------------------------------------------------------------------------------- Spark aggregates
def slot_table(logs):
    """(logging_policy, dt, position, ad_id) -> n, n_p (non-null propensities), sum_p, min_p, max_p."""
    from pyspark.sql import functions as F

    s = logs.select(F.col("logging_policy"), F.col("dt"), F.explode(F.col("slots")).alias("s"))
    return (s.groupBy(F.col("logging_policy"), F.col("dt"), F.col("s.position").alias("position"),
                      F.col("s.ad_id").alias("ad_id"))
             .agg(F.count(F.lit(1)).alias("n"), F.count(F.col("s.propensity")).alias("n_p"),
                  F.sum(F.col("s.propensity")).alias("sum_p"), F.min(F.col("s.propensity")).alias("min_p"),
                  F.max(F.col("s.propensity")).alias("max_p")))


def event_table(logs):
    from pyspark.sql import functions as F

    return logs.groupBy(F.col("logging_policy"), F.col("dt")).agg(F.count(F.lit(1)).alias("events"))


def context_table(logs, include_context_id: bool = True):
    """(logging_policy, position, feature, value, ad_id) -> n: each context feature x logged ad (check a)."""
    from pyspark.sql import functions as F

    entries = F.coalesce(F.transform(F.map_entries(F.col("context")),
                                     lambda e: F.struct(e["key"].alias("feature"), e["value"].alias("value"))),
                         F.array().cast("array<struct<feature:string,value:string>>"))
    if include_context_id:
        entries = F.concat(entries, F.array(F.struct(F.lit("context_id").alias("feature"),
                                                     F.col("context_id").alias("value"))))
    a = logs.select(F.col("logging_policy"), F.col("slots"), F.explode(entries).alias("f"))
    b = a.select(F.col("logging_policy"), F.col("f.feature").alias("feature"),
                 F.coalesce(F.col("f.value"), F.lit("<null>")).alias("value"), F.explode(F.col("slots")).alias("s"))
    return (b.groupBy(F.col("logging_policy"), F.col("s.position").alias("position"), F.col("feature"),
                      F.col("value"), F.col("s.ad_id").alias("ad_id"))
             .agg(F.count(F.lit(1)).alias("n")))


def pair_cells(logs):
    """(logging_policy, stratum, j, k, a, b) -> n: events with ad a at position j and ad b at position k (j<k),
    within the context stratum (context_id)."""
    from pyspark.sql import functions as F

    pairs = F.flatten(F.transform(F.col("slots"), lambda s1: F.transform(
        F.filter(F.col("slots"), lambda s2: s2["position"] > s1["position"]),
        lambda s2: F.struct(s1["position"].alias("j"), s2["position"].alias("k"),
                            s1["ad_id"].alias("a"), s2["ad_id"].alias("b")))))
    x = logs.select(F.col("logging_policy"), F.coalesce(F.col("context_id"), F.lit("<null>")).alias("stratum"),
                    F.explode(pairs).alias("p"))
    return (x.groupBy(F.col("logging_policy"), F.col("stratum"), F.col("p.j").alias("j"), F.col("p.k").alias("k"),
                      F.col("p.a").alias("a"), F.col("p.b").alias("b"))
             .agg(F.count(F.lit(1)).alias("n")))


def pair_strata(cells, spark=None):
    """Per (logging_policy, stratum, j, k): n, r, c, s = sum O^2/(R_a C_b), o_diag, e_diag (see
    :func:`stratified_dependence`) as a pandas table.

    The slot marginals R (slot j's ads) and C (slot k's ads) per stratum are small (strata x pairs x ads): they
    come to the driver, give r, c and the collision expectation E = sum_a R(a) C(a) / n, and go back as
    broadcast tables so that the one pass over the cells that computes s shuffles nothing but the result.
    """
    from pyspark.sql import functions as F

    key = ["logging_policy", "stratum", "j", "k"]
    rows_sdf = cells.groupBy(*[F.col(c_) for c_ in key], F.col("a")).agg(F.sum(F.col("n")).alias("ra"))
    cols_sdf = cells.groupBy(*[F.col(c_) for c_ in key], F.col("b")).agg(F.sum(F.col("n")).alias("cb"))
    rows_pdf, cols_pdf = rows_sdf.toPandas(), cols_sdf.toPandas()
    spark = spark or cells.sparkSession
    schema_r = "logging_policy string, stratum string, j int, k int, a string, ra long"
    schema_c = "logging_policy string, stratum string, j int, k int, b string, cb long"
    r_b = F.broadcast(spark.createDataFrame(rows_pdf, schema_r))
    c_b = F.broadcast(spark.createDataFrame(cols_pdf, schema_c))
    sums = (cells.join(r_b, key + ["a"]).join(c_b, key + ["b"])
                 .groupBy(*[F.col(c_) for c_ in key])
                 .agg(F.sum(F.col("n")).alias("n"),
                      F.sum(F.col("n").cast("double") * F.col("n") / (F.col("ra") * F.col("cb"))).alias("s"),
                      F.sum(F.when(F.col("a") == F.col("b"), F.col("n")).otherwise(F.lit(0))).alias("o_diag"))
                 .toPandas())
    return strata_from_marginals(sums, rows_pdf, cols_pdf)


def strata_from_marginals(sums: pd.DataFrame, rows: pd.DataFrame, cols: pd.DataFrame) -> pd.DataFrame:
    """r, c = distinct ads of slot j / slot k in the stratum; e_diag = sum_a R(a) C(a) / n (check d)."""
    key = ["logging_policy", "stratum", "j", "k"]
    r = rows.groupby(key).size().rename("r")
    c = cols.groupby(key).size().rename("c")
    diag = rows.merge(cols.rename(columns={"b": "a"}), on=key + ["a"])
    rc = (diag["ra"].astype(float) * diag["cb"]).groupby([diag[k_] for k_ in key]).sum().rename("rc_diag")
    out = sums.set_index(key).join(r).join(c).join(rc).reset_index()
    out["rc_diag"] = out["rc_diag"].fillna(0.0)
    out["e_diag"] = out["rc_diag"] / out["n"]
    return out[key + ["n", "r", "c", "s", "o_diag", "e_diag"]]


def target_mass(decisions, logs, support):
    """Per (policy_id, logging_policy, position, ad_id): the target's probability mass over the window's events
    (sum_t pi_k(a|x_t)), joined to the logged support (n, max_p) of the event's logging policy (a broadcast join
    with the small support table). Decisions flagged by :func:`scavenger.checks.rules.flag_decisions` already
    carry ``_logging_policy``; plain decisions are joined with the logs' events first."""
    from pyspark.sql import functions as F

    from .rules import LOGGING_POLICY

    if LOGGING_POLICY in decisions.columns:
        d = decisions.select(F.col("policy_id"), F.col(LOGGING_POLICY).alias("logging_policy"),
                             F.explode(F.col("slots")).alias("s"))
    else:
        ev = logs.select(F.col("event_id"), F.col("dt"), F.col("logging_policy"))
        d = (decisions.join(ev, ["event_id", "dt"])
                      .select(F.col("policy_id"), F.col("logging_policy"), F.explode(F.col("slots")).alias("s")))
    mass = (d.groupBy(F.col("policy_id"), F.col("logging_policy"), F.col("s.position").alias("position"),
                      F.col("s.ad_id").alias("ad_id"))
             .agg(F.sum(F.col("s.probability")).alias("mass")))
    return mass.join(F.broadcast(support), ["logging_policy", "position", "ad_id"], "left")


# --------------------------------------------------------------------------------------------- verdicts
def check_a(ctx: pd.DataFrame, slot: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Context independence per (policy, position, feature); time dependence shown without failing."""
    out = []
    partitions = _partitioning_features(ctx)
    for (policy, pos, feat), g in ctx.groupby(["logging_policy", "position", "feature"], sort=True):
        scope = f"policy={policy} position={pos} feature={feat}"
        part = partitions.get((policy, pos))
        if part is not None and feat in part["features"]:
            out.append(row("a.context_independence", scope, None, cfg.cramers_v_max, PASS,
                           f"{feat} partitions the ads (each ad is shown under one {feat} value only): it selects "
                           f"the eligible ads, not the exploration; the other features are tested within its "
                           f"{part['n_strata']} strata"))
            continue
        if part is not None:
            g = g.assign(_stratum=g["ad_id"].map(part["stratum_of_ad"]))
            st = _pooled_within(g, "_stratum")
            detail = (f"within-{part['features'][0]} pooled Cramer's V={st['v_bc']:.4f} (bias-corrected) over "
                      f"{st['strata']} strata, chi2={st['chi2']:.1f}, dof={st['dof']}, n={st['n']:.0f}")
            verdict = (WARN if st["n"] < cfg.min_table_n else FAIL if st["v_bc"] > cfg.cramers_v_max else PASS)
            msg = detail + {PASS: ": no material dependence within the eligible sets",
                            WARN: ": too few impressions to judge",
                            FAIL: ": the logged ad depends on the current context within an eligible set, so "
                                  "scavenging/ADC estimates are not consistent (seed 001 Theorem 1)"}[verdict]
            out.append(row("a.context_independence", scope, st["v_bc"], cfg.cramers_v_max, verdict, msg))
            continue
        levels = g["value"].nunique()
        if levels > cfg.max_feature_levels:
            out.append(row("a.context_independence", scope, None, cfg.cramers_v_max, WARN,
                           f"{levels} levels > {cfg.max_feature_levels}: not tested; bucket the feature or raise "
                           f"max_feature_levels"))
            continue
        table = g.pivot_table(index="value", columns="ad_id", values="n", aggfunc="sum", fill_value=0)
        st = chi2_cramers_v(table.to_numpy())
        detail = (f"Cramer's V={st['v_bc']:.4f} (bias-corrected; raw {st['v']:.4f}), chi2={st['chi2']:.1f}, "
                  f"dof={st['dof']}, p={st['p_value']:.3g}, n={st['n']:.0f}")
        if st["r"] < 2:
            out.append(row("a.context_independence", scope, 0.0, cfg.cramers_v_max, PASS,
                           f"feature {feat} has one value here: nothing to depend on"))
        elif st["n"] < cfg.min_table_n:
            out.append(row("a.context_independence", scope, st["v_bc"], cfg.cramers_v_max, WARN,
                           f"{detail}: fewer than {cfg.min_table_n} impressions, cannot judge; widen the window"))
        elif st["v_bc"] > cfg.cramers_v_max:
            out.append(row("a.context_independence", scope, st["v_bc"], cfg.cramers_v_max, FAIL,
                           f"{detail}: the logged ad depends on the current context, so scavenging and ADC "
                           f"estimates are not consistent (seed 001 Theorem 1); use a context-independent "
                           f"exploration policy (or only its exploration events) for these estimators"))
        else:
            out.append(row("a.context_independence", scope, st["v_bc"], cfg.cramers_v_max, PASS,
                           f"{detail}: no material dependence of the logged ad on {feat}"))
    # time / history dependence: day x ad, shown only
    days = slot.groupby(["logging_policy", "position"])["dt"].nunique()
    for (policy, pos), nd in days.items():
        if nd < 2:
            continue
        g = slot[(slot["logging_policy"] == policy) & (slot["position"] == pos)]
        table = g.pivot_table(index="dt", columns="ad_id", values="n", aggfunc="sum", fill_value=0)
        st = chi2_cramers_v(table.to_numpy())
        out.append(row("a.time_dependence", f"policy={policy} position={pos}", st["v_bc"], None, PASS,
                       f"Cramer's V of day x logged ad = {st['v_bc']:.4f} over {nd} days: dependence on time or "
                       f"history is allowed (seed 001 Theorem 3); shown for information"))
    return out


def _partitioning_features(ctx: pd.DataFrame) -> dict:
    """Per (policy, position): features with >= 2 values under which every ad appears with one value only (e.g.
    OBD's campaign: ad ids are per campaign). They define eligible sets, not exploration; the stratum of an ad is
    its value of the first such feature (by name). Only when ads have >= 20 impressions on average."""
    out = {}
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


def _pooled_within(g: pd.DataFrame, stratum: str) -> dict:
    """Sum over strata of the chi-square of value x ad; pooled bias-corrected V as in check d:
    sqrt(max(0, sum chi2_s - sum dof_s n_s/(n_s-1)) / sum n_s min(r_s-1, c_s-1))."""
    chi2 = e0 = denom = n = 0.0
    dof, strata = 0, 0
    for _, h in g.groupby(stratum, sort=True):
        t = h.pivot_table(index="value", columns="ad_id", values="n", aggfunc="sum", fill_value=0).to_numpy()
        st = chi2_cramers_v(t)
        n += st["n"]
        if st["r"] < 2 or st["c"] < 2:
            continue
        strata += 1
        chi2 += st["chi2"]
        dof += st["dof"]
        e0 += st["dof"] * st["n"] / (st["n"] - 1)
        denom += st["n"] * min(st["r"] - 1, st["c"] - 1)
    v_bc = float(np.sqrt(max(0.0, chi2 - e0) / denom)) if denom > 0 else 0.0
    return {"chi2": chi2, "dof": dof, "v_bc": v_bc, "n": n, "strata": strata}


def check_b(slot: pd.DataFrame, mass: pd.DataFrame | None, cfg: AssumptionConfig) -> list[dict]:
    """Exploration minimums T_a, M(a, i); target mass on rarely observed (position, ad)."""
    out = []
    if slot.empty:
        return [row("b.exploration", "all", 0, cfg.min_t, FAIL, "no clean impressions in the window")]
    t_a = slot.groupby("ad_id")["n"].sum()
    low = int((t_a < cfg.min_t).sum())
    out.append(row("b.exploration_T", "all", float(t_a.min()), cfg.min_t, WARN if low else PASS,
                   f"T_a: {len(t_a)} ads, min {int(t_a.min())}, median {float(t_a.median()):.0f}; {low} ads below "
                   f"{cfg.min_t} impressions" + ("; their estimates rest on few events (seed 001 Theorem 3 bound "
                                                 "grows as 1/sqrt(T_a))" if low else "")))
    m = slot.groupby(["position", "ad_id"])["n"].sum().reset_index()
    for pos, g in m.groupby("position"):
        low = int((g["n"] < cfg.min_m).sum())
        out.append(row("b.exploration_M", f"position={pos}", float(g["n"].min()), cfg.min_m, WARN if low else PASS,
                       f"M(a,{pos}): {len(g)} ads shown, min {int(g['n'].min())}; {low} below {cfg.min_m}"
                       + ("; ADC weights of those ads are noisy" if low else "")))
    if mass is not None and not mass.empty:
        pooled = m.rename(columns={"n": "m_pooled"})
        mm = mass.merge(pooled, on=["position", "ad_id"], how="left")
        mm["m_pooled"] = mm["m_pooled"].fillna(0)
        for policy, g in mm.groupby("policy_id"):
            total = float(g["mass"].sum())
            rare = float(g.loc[g["m_pooled"] < cfg.min_m, "mass"].sum())
            share = rare / total if total > 0 else 0.0
            verdict = FAIL if share > cfg.rare_mass_max else (WARN if share > 0 else PASS)
            out.append(row("b.rare_mass", f"policy={policy}", share, cfg.rare_mass_max, verdict,
                           f"{share:.4%} of the target's mass is on (position, ad) pairs logged fewer than "
                           f"{cfg.min_m} times" + ("; its estimate leans on a handful of events: collect more "
                                                  "exploration or restrict the target" if verdict != PASS else "")))
    return out


def check_c(mass: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Unsupported target mass per target policy."""
    out = []
    for policy, g in mass.groupby("policy_id"):
        total = float(g["mass"].sum())
        unsup = g["n"].isna() | ~(g["max_p"].fillna(0) > 0)
        share = float(g.loc[unsup, "mass"].sum()) / total if total > 0 else 0.0
        worst_pairs = (g.loc[unsup].sort_values("mass", ascending=False).head(3)
                        .apply(lambda r: f"({r['position']}, {r['ad_id']})", axis=1).tolist())
        verdict = FAIL if share > cfg.support_max else (WARN if share > 0 else PASS)
        msg = f"{share:.4%} of the target's mass is on (position, ad) pairs its events' logging policy never showed"
        if verdict != PASS:
            msg += (f", e.g. {', '.join(worst_pairs)}; importance weights are undefined there: IPS/PI/PI++ refuse "
                    f"(or mark) this estimate -- restrict the target to logged ads or log with more exploration")
        out.append(row("c.support", f"policy={policy}", share, cfg.support_max, verdict, msg))
    return out


def check_d(strata: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Factorized logging: per (policy, j, k) pooled within-context dependence and the collision test."""
    out = []
    for (policy, j, k), g in strata.groupby(["logging_policy", "j", "k"], sort=True):
        st = stratified_dependence(g)
        scope = f"policy={policy} slots={j},{k}"
        if st["n"] < cfg.min_table_n:
            verdict = WARN
            msg = f"only {st['n']:.0f} events: cannot judge slot independence"
        elif st["v_pooled"] > cfg.factor_v_max:
            verdict = FAIL
            msg = (f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata (chi2={st['chi2']:.1f}, "
                   f"dof={st['dof']:.0f}): slot {k}'s ad depends on slot {j}'s given the context, so the logging "
                   f"policy does not factorize and PI/PI++ are biased (seed 002); use IPS with the joint propensity")
        else:
            verdict = PASS
            msg = f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata: no material dependence"
        out.append(row("d.slot_dependence", scope, st["v_pooled"], cfg.factor_v_max, verdict, msg))
        o, e, ratio = st["collisions_observed"], st["collisions_expected"], st["collision_ratio"]
        if e < cfg.min_expected:
            out.append(row("d.collisions", scope, None if np.isnan(ratio) else ratio, cfg.collision_tol, PASS,
                           f"expected repeats of one ad in slots {j} and {k} = {e:.2f} < {cfg.min_expected}: the "
                           f"slot pools (nearly) do not overlap, nothing to test"))
        elif abs(ratio - 1.0) > cfg.collision_tol:
            out.append(row("d.collisions", scope, ratio, cfg.collision_tol, FAIL,
                           f"{o:.0f} events show the same ad in slots {j} and {k}, {e:.1f} expected if the slots were "
                           f"chosen independently: the slate is sampled without replacement (ranked layout), not "
                           f"factorized; PI/PI++ do not apply -- use IPS with the joint slate propensity"))
        else:
            out.append(row("d.collisions", scope, ratio, cfg.collision_tol, PASS,
                           f"{o:.0f} repeats of one ad in slots {j},{k} vs {e:.1f} expected: consistent"))
    return out


def check_e(slot: pd.DataFrame, events: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Propensity calibration per (policy, position), stratified by day."""
    out = []
    cells = calibration_cells(slot, events, cfg.min_expected)
    for (policy, pos), g in cells.groupby(["logging_policy", "position"], sort=True):
        scope = f"policy={policy} position={pos}"
        sum_p = g[g["constant"]].groupby("dt")["p"].sum()
        t = g[g["testable"]]
        varying = int((~g["constant"]).sum())
        if t.empty:
            out.append(row("e.calibration", scope, None, cfg.calib_tol, WARN,
                           f"no testable cell: {varying} of {len(g)} (day, ad) cells have a propensity that varies "
                           f"with the context (logging is not input-independent) or too few expected impressions"))
            continue
        significant = t[t["z"].abs() > cfg.calib_z]
        bad = significant[significant["rel"].abs() > cfg.calib_tol]
        # statistic: the largest relative deviation among cells whose deviation is significant (|z| > calib_z)
        stat = float(significant["rel"].abs().max()) if not significant.empty else 0.0
        max_rel = float(t["rel"].abs().max())
        chi2 = float((t["z"] ** 2).sum())
        over = sum_p[sum_p > 1 + 1e-6]
        if not over.empty:
            out.append(row("e.calibration", scope, float(over.max()), 1.0, FAIL,
                           f"logged propensities of the shown ads sum to {float(over.max()):.4f} > 1 on "
                           f"{len(over)} day(s): the serving system logs wrong propensities"))
        elif not bad.empty:
            w = bad.loc[bad["rel"].abs().idxmax()]
            out.append(row("e.calibration", scope, stat, cfg.calib_tol, FAIL,
                           f"{len(bad)} of {len(t)} (day, ad) cells off: e.g. ad {w['ad_id']} on {w['dt']} shown "
                           f"{int(w['n'])} times, {w['expected']:.1f} expected from its logged propensity "
                           f"{w['p']:.4g} (z={w['z']:.1f}); the logged propensities are not the serving "
                           f"probabilities -- fix the logging before using importance weights"))
        else:
            out.append(row("e.calibration", scope, stat, cfg.calib_tol, PASS,
                           f"{len(t)} (day, ad) cells, none off by more than {cfg.calib_z} sigma and "
                           f"{cfg.calib_tol:.0%} (max |O/E-1|={max_rel:.4f}, sum z^2={chi2:.1f})"
                           + (f"; {varying} cells with context-dependent propensities not tested" if varying else "")))
    return out
