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
   independent of the input), the observed count M must match n_events * propensity (a cell is off past 10%,
   4 sigma and an exact binomial p-value under 0.001 / cells tested, Bonferroni) -- within the scope where
   logging is input-independent: per logging policy and, by default (``calibration_scope="auto"``), per value
   of context_id when context_id partitions the ads (the Open Bandit Dataset's campaigns: each has its own items
   and propensities, so pooled they would sum to 3); ``context:<key>`` scopes by a context-map value. Per
   (policy, position) the (day, ad) cells are tested; per policy each ad is also tested over all its days and
   positions (``e.calibration_window``). A policy whose propensity varies within most cells (history- or
   context-dependent logging, e.g. OBD's Thompson sampling) is reported as not testable (warn).

Spark work is plain code-generated SQL (explode, array_min/max, map_entries): no lambdas on the row path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PASS, WARN, FAIL = "pass", "warn", "fail"
CHECK_NAMES = {"a": "context independence", "b": "enough exploration", "c": "support",
               "d": "factorized logging", "e": "propensity calibration"}
ALL_CHECKS = ("a", "b", "c", "d", "e")
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
    calib_z: float = 4.0                # e: ... and |z| > calib_z ...
    calib_alpha: float = 0.001          # e: ... and p < calib_alpha / (cells tested): Bonferroni, so a calibrated
                                        #    logger fails with probability <= calib_alpha however many cells
    calibration_scope: str = "auto"     # e: where logging is input-independent, see parse_calibration_scope
    calib_max_varying: float = 0.5      # e: a policy whose propensity varies within more than this share of its
                                        #    (day, position, ad) cells seen twice or more is not input-independent


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


def parse_calibration_scope(text: str | None) -> tuple[str, str | None]:
    """``(mode, key)`` of a check-e scope: mode ``policy`` (key None), ``auto`` (stratify by key where it
    partitions the ads) or ``fixed`` (always stratify by key). ValueError on anything else."""
    spec = (text or "auto").strip()
    if spec in ("policy", "none"):
        return "policy", None
    mode, key = ("auto", spec[len("auto:"):]) if spec.startswith("auto:") else \
        (("auto", "context_id") if spec == "auto" else ("fixed", spec))
    if key != "context_id" and not (key.startswith("context:") and len(key) > len("context:")):
        raise ValueError(f"calibration scope must be auto, auto:KEY, policy or KEY with KEY context_id or "
                         f"context:NAME; got {text!r}")
    return mode, key


def partition_strata(slot: pd.DataFrame, min_per_ad: float = 20.0) -> dict:
    """Per logging policy whose ads the scope key partitions: ad_id -> its one value (from the ``stratum_min`` /
    ``stratum_max`` of :func:`slot_table`). A partition needs >= 2 values, every ad under one value only, >= 2
    ads per value and >= ``min_per_ad`` impressions per ad on average (a sparse table looks like a partition by
    chance)."""
    out = {}
    if slot.empty or "stratum_min" not in slot.columns:
        return out
    # every policy at once (one group-by), then a Series only for the policies that pass
    per_ad = slot.groupby(["logging_policy", "ad_id"], sort=True).agg(
        lo=("stratum_min", "min"), hi=("stratum_max", "max"), n=("n", "sum"))
    pol = per_ad.assign(split=per_ad["lo"] != per_ad["hi"]).groupby(level=0).agg(
        split=("split", "any"), n_values=("lo", "nunique"), ads=("n", "size"), mean_n=("n", "mean"))
    ok = pol[~pol["split"] & (pol["n_values"] >= 2) & (pol["ads"] >= 2 * pol["n_values"])
             & (pol["mean_n"] >= min_per_ad)]
    for policy in ok.index:
        out[policy] = per_ad.loc[policy, "lo"]
    return out


def calibration_slot(slot: pd.DataFrame, strata: dict) -> pd.DataFrame:
    """The slot table with a ``stratum`` column: the ad's value for the policies in ``strata`` (see
    :func:`partition_strata`), ``all`` elsewhere."""
    out = slot.drop(columns=[c for c in ("stratum_min", "stratum_max") if c in slot.columns])
    stratum = pd.Series("all", index=out.index, dtype=object)
    for policy, of_ad in strata.items():
        m = out["logging_policy"] == policy
        stratum[m] = out.loc[m, "ad_id"].map(of_ad).astype(object)
    return out.assign(stratum=stratum)


def calibration_cells(slot: pd.DataFrame, events: pd.DataFrame, min_expected: float) -> pd.DataFrame:
    """Per (policy, [stratum,] dt, position, ad) with a constant logged propensity p: E = N * p with N the slates
    of (policy, [stratum,] dt) showing that position, O = M, z = (O - E) / sqrt(E (1 - p)), rel = O / E - 1
    (check e; seed 002: mu_k must be the true marginals). ``events`` has logging_policy, [stratum,] dt,
    position, events; with a ``stratum`` column in both tables the cells are matched within it."""
    keys = ["logging_policy", "dt", "position"]
    if "stratum" in slot.columns and "stratum" in events.columns:
        keys.insert(1, "stratum")
    cells = slot.merge(events, on=keys, how="left")
    p = cells["sum_p"] / cells["n_p"].where(cells["n_p"] > 0)
    constant = (cells["max_p"] - cells["min_p"]).abs() <= 1e-9 * cells["max_p"].abs().clip(lower=1e-300)
    cells = cells.assign(p=p, constant=constant & p.notna())
    cells["expected"] = cells["events"] * cells["p"]
    var = cells["expected"] * (1.0 - cells["p"]).clip(lower=0.0)
    cells["z"] = (cells["n"] - cells["expected"]) / np.sqrt(var.where(var > 0))
    cells["rel"] = cells["n"] / cells["expected"] - 1.0
    cells["testable"] = cells["constant"] & (cells["expected"] >= min_expected)
    cells["p_value"] = binomial_two_sided_p(cells["n"], cells["events"], cells["p"].where(cells["constant"]))
    return cells


def binomial_two_sided_p(observed, trials, p) -> np.ndarray:
    """Exact two-sided p-value of ``observed`` successes in ``trials`` draws with probability ``p`` (check e: under a
    calibrated logger M ~ Binomial(N, p)): min(1, 2 min(P[X <= O], P[X >= O])). NaN where ``p`` or ``trials`` is
    missing or p is outside [0, 1]. Exact where the normal z is not: with E = 5 and small p, |z| > 4 happens with
    probability 7.0e-4, 11 times the normal tail's 6.3e-5."""
    from scipy.stats import binom

    o = np.asarray(observed, dtype=float)
    n = np.asarray(trials, dtype=float)
    q = np.asarray(p, dtype=float)
    ok = np.isfinite(o) & np.isfinite(n) & np.isfinite(q) & (q >= 0) & (q <= 1) & (n >= 0)
    out = np.full(o.shape, np.nan)
    if ok.any():
        lower = binom.cdf(o[ok], n[ok], q[ok])
        upper = binom.sf(o[ok] - 1, n[ok], q[ok])
        out[ok] = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    return out


def window_calibration(cells: pd.DataFrame, min_expected: float) -> pd.DataFrame:
    """Per (policy, [stratum,] ad): the constant-propensity cells of :func:`calibration_cells` summed over the
    window's days and positions: O = sum M, E = sum N p, var = sum N p (1 - p) (conservative for a ranked slate,
    whose positions cannot show the same ad twice), z and rel as per cell. One ad mis-logged by a factor is seen
    here with the power of all its impressions, where a single (day, position) cell holds only a few."""
    keys = ["logging_policy"] + (["stratum"] if "stratum" in cells.columns else []) + ["ad_id"]
    c = cells[cells["constant"]]
    c = c.assign(var=c["expected"] * (1.0 - c["p"]).clip(lower=0.0))
    out = c.groupby(keys, as_index=False).agg(n=("n", "sum"), expected=("expected", "sum"), var=("var", "sum"),
                                              cells=("n", "size"))
    out["z"] = (out["n"] - out["expected"]) / np.sqrt(out["var"].where(out["var"] > 0))
    out["rel"] = out["n"] / out["expected"] - 1.0
    out["testable"] = out["expected"] >= min_expected
    out["p_value"] = normal_two_sided_p(out["z"])
    return out


def normal_two_sided_p(z) -> np.ndarray:
    """2 P[Z > |z|] for a standard normal Z; NaN stays NaN (check e's window rows, sums of many binomials)."""
    from scipy.stats import norm

    return 2.0 * norm.sf(np.abs(np.asarray(z, dtype=float)))


def bonferroni_z(alpha: float, tests: int) -> float:
    """The |z| a normal two-sided test must pass for p < alpha / tests (shown in check e's messages)."""
    from scipy.stats import norm

    return float(norm.isf(alpha / (2.0 * max(int(tests), 1))))


# ---------------------------------------------------------------------------------------- Spark aggregates
def slot_table(logs, stratum_key: str | None = None):
    """(logging_policy, dt, position, ad_id) -> n, n_p (non-null propensities), sum_p, min_p, max_p.

    ``stratum_key`` (see :func:`stratum_column`) adds ``stratum_min``/``stratum_max``: the smallest and largest
    value of that key over the rows of the cell, so that check e can tell from this small table whether the key
    partitions the ads (every ad under one value: OBD's campaign) -- two more aggregates in the same pass."""
    from pyspark.sql import functions as F

    cols = [F.col("logging_policy"), F.col("dt"), F.explode(F.col("slots")).alias("s")]
    if stratum_key:
        cols.append(stratum_column(stratum_key).alias("_stratum"))
    s = logs.select(*cols)
    aggs = [F.count(F.lit(1)).alias("n"), F.count(F.col("s.propensity")).alias("n_p"),
            F.sum(F.col("s.propensity")).alias("sum_p"), F.min(F.col("s.propensity")).alias("min_p"),
            F.max(F.col("s.propensity")).alias("max_p")]
    if stratum_key:
        aggs += [F.min(F.col("_stratum")).alias("stratum_min"), F.max(F.col("_stratum")).alias("stratum_max")]
    return (s.groupBy(F.col("logging_policy"), F.col("dt"), F.col("s.position").alias("position"),
                      F.col("s.ad_id").alias("ad_id"))
             .agg(*aggs))


def stratum_column(key: str):
    """The column of a calibration scope key: ``context_id`` or ``context:<name>`` (a value of the context map);
    null becomes the string ``<null>``."""
    from pyspark.sql import functions as F

    if key == "context_id":
        col = F.col("context_id")
    elif key.startswith("context:") and len(key) > len("context:"):
        col = F.col("context").getItem(key[len("context:"):])
    else:
        raise ValueError(f"calibration scope key must be context_id or context:<name>, got {key!r}")
    return F.coalesce(col.cast("string"), F.lit("<null>"))


def stratified_slot_table(logs, stratum_key: str):
    """:func:`slot_table` with the stratum as one more key: (logging_policy, stratum, dt, position, ad_id) -> n,
    n_p, sum_p, min_p, max_p. For a scope the user declared (check e), where the key need not partition the ads."""
    from pyspark.sql import functions as F

    s = logs.select(F.col("logging_policy"), stratum_column(stratum_key).alias("stratum"), F.col("dt"),
                    F.explode(F.col("slots")).alias("s"))
    return (s.groupBy(F.col("logging_policy"), F.col("stratum"), F.col("dt"), F.col("s.position").alias("position"),
                      F.col("s.ad_id").alias("ad_id"))
             .agg(F.count(F.lit(1)).alias("n"), F.count(F.col("s.propensity")).alias("n_p"),
                  F.sum(F.col("s.propensity")).alias("sum_p"), F.min(F.col("s.propensity")).alias("min_p"),
                  F.max(F.col("s.propensity")).alias("max_p")))


def event_table(logs):
    from pyspark.sql import functions as F

    return logs.groupBy(F.col("logging_policy"), F.col("dt")).agg(F.count(F.lit(1)).alias("events"))


def context_table(logs, include_context_id: bool = True):
    """(logging_policy, position, feature, value, ad_id) -> n: each context feature x logged ad (check a).

    map_entries + concat + two explodes: code-generated (no lambda)."""
    from pyspark.sql import functions as F

    entry = "array<struct<key:string,value:string>>"
    entries = F.coalesce(F.map_entries(F.col("context")).cast(entry), F.array().cast(entry))
    if include_context_id:
        entries = F.concat(entries, F.array(F.struct(F.lit("context_id").alias("key"),
                                                     F.col("context_id").alias("value"))).cast(entry))
    a = logs.select(F.col("logging_policy"), F.col("slots"), F.explode(entries).alias("f"))
    b = a.select(F.col("logging_policy"), F.col("f.key").alias("feature"),
                 F.coalesce(F.col("f.value"), F.lit("<null>")).alias("value"), F.explode(F.col("slots")).alias("s"))
    return (b.groupBy(F.col("logging_policy"), F.col("s.position").alias("position"), F.col("feature"),
                      F.col("value"), F.col("s.ad_id").alias("ad_id"))
             .agg(F.count(F.lit(1)).alias("n")))


PAIR_KEY = ["logging_policy", "stratum", "j", "k"]


def slot_pairs(logs):
    """One row per event and pair of its slots j < k (by position): (logging_policy, stratum, j, k, a, b), the
    stratum being the context_id. Two explodes and a filter: code-generated, unlike nested lambdas."""
    from pyspark.sql import functions as F

    x = logs.select(F.col("logging_policy"), F.coalesce(F.col("context_id"), F.lit("<null>")).alias("stratum"),
                    F.col("slots"), F.explode(F.col("slots")).alias("s1"))
    y = x.select(F.col("logging_policy"), F.col("stratum"), F.col("s1"), F.explode(F.col("slots")).alias("s2"))
    return (y.where(F.col("s2.position") > F.col("s1.position"))
             .select(F.col("logging_policy"), F.col("stratum"), F.col("s1.position").alias("j"),
                     F.col("s2.position").alias("k"), F.col("s1.ad_id").alias("a"), F.col("s2.ad_id").alias("b")))


def pair_cells(logs):
    """(logging_policy, stratum, j, k, a, b) -> n: events with ad a at position j and ad b at position k (j<k),
    within the context stratum (context_id)."""
    return cell_counts(slot_pairs(logs))


def cell_counts(pairs):
    """(logging_policy, stratum, j, k, a, b) -> n of the slot pairs, hash-partitioned by the cell before counting.

    With a large ad pool almost every cell is distinct, so a partial count over a whole input split only grows a
    hash map as large as the split (60M pairs of 10M events in 2 splits ran a 4g driver out of heap). After the
    exchange each task counts only its own cells; the exchange moves what the partial count would have left."""
    from pyspark.sql import functions as F

    keys = [F.col(c_) for c_ in PAIR_KEY] + [F.col("a"), F.col("b")]
    return pairs.repartition(*keys).groupBy(*keys).agg(F.count(F.lit(1)).alias("n"))


def _pair_marginals(frame, weight=None):
    """Slot j's ads (R) and slot k's ads (C) per (logging_policy, stratum, j, k), in one aggregation of ``frame``
    (pairs, or cells with their count ``weight``); small pandas tables."""
    from pyspark.sql import functions as F

    w = F.lit(1).cast("long") if weight is None else F.col(weight)
    sides = F.array(F.struct(F.lit("r").alias("side"), F.col("a").alias("ad"), w.alias("w")),
                    F.struct(F.lit("c").alias("side"), F.col("b").alias("ad"), w.alias("w")))
    m = (frame.select(*[F.col(c_) for c_ in PAIR_KEY], F.explode(sides).alias("x"))
              .groupBy(*[F.col(c_) for c_ in PAIR_KEY], F.col("x.side").alias("side"), F.col("x.ad").alias("ad"))
              .agg(F.sum(F.col("x.w")).alias("cnt"))
              .toPandas())
    rows = m[m["side"] == "r"].rename(columns={"ad": "a", "cnt": "ra"})[PAIR_KEY + ["a", "ra"]]
    cols = m[m["side"] == "c"].rename(columns={"ad": "b", "cnt": "cb"})[PAIR_KEY + ["b", "cb"]]
    return rows.reset_index(drop=True), cols.reset_index(drop=True)


def _pair_sums(cells, rows_pdf, cols_pdf, spark):
    """sum_cells O^2 / (R_a C_b), n and the diagonal per (logging_policy, stratum, j, k): the marginals go back as
    broadcast tables, so the pass over the cells shuffles nothing but its small result."""
    from pyspark.sql import functions as F

    schema_r = "logging_policy string, stratum string, j int, k int, a string, ra long"
    schema_c = "logging_policy string, stratum string, j int, k int, b string, cb long"
    r_b = F.broadcast(spark.createDataFrame(rows_pdf.astype(object).where(rows_pdf.notna(), None), schema_r))
    c_b = F.broadcast(spark.createDataFrame(cols_pdf.astype(object).where(cols_pdf.notna(), None), schema_c))
    return (cells.join(r_b, PAIR_KEY + ["a"]).join(c_b, PAIR_KEY + ["b"])
                 .groupBy(*[F.col(c_) for c_ in PAIR_KEY])
                 .agg(F.sum(F.col("n")).alias("n"),
                      F.sum(F.col("n").cast("double") * F.col("n") / (F.col("ra") * F.col("cb"))).alias("s"),
                      F.sum(F.when(F.col("a") == F.col("b"), F.col("n")).otherwise(F.lit(0))).alias("o_diag"))
                 .toPandas())


def pair_strata(cells, spark=None):
    """Per (logging_policy, stratum, j, k): n, r, c, s = sum O^2/(R_a C_b), o_diag, e_diag (see
    :func:`stratified_dependence`) as a pandas table, from the cells of :func:`pair_cells`.

    The slot marginals R (slot j's ads) and C (slot k's ads) per stratum are small (strata x pairs x ads): they
    come to the driver, give r, c and the collision expectation E = sum_a R(a) C(a) / n, and go back as
    broadcast tables so that the one pass over the cells that computes s shuffles nothing but the result.
    """
    spark = spark or cells.sparkSession
    rows_pdf, cols_pdf = _pair_marginals(cells, weight="n")
    return strata_from_marginals(_pair_sums(cells, rows_pdf, cols_pdf, spark), rows_pdf, cols_pdf)


def pair_strata_from_logs(logs, spark=None):
    """:func:`pair_strata` of :func:`pair_cells` of ``logs`` in two passes over the logs and nothing persisted:
    the marginals straight from the slot pairs (map-side aggregation leaves strata x pairs x ads rows to shuffle),
    then the cells with their marginals broadcast."""
    spark = spark or logs.sparkSession
    pairs = slot_pairs(logs)
    rows_pdf, cols_pdf = _pair_marginals(pairs)
    cells = cell_counts(pairs)
    return strata_from_marginals(_pair_sums(cells, rows_pdf, cols_pdf, spark), rows_pdf, cols_pdf)


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
            out.append(row("a.context_independence", scope, None, cfg.cramers_v_max, PASS,
                           f"{feat} partitions the ads (each ad is shown under one {feat} value only): it selects "
                           f"the eligible ads, not the exploration; the other features are tested within its "
                           f"{part['n_strata']} strata"))
            continue
        if part is not None:
            g = ctx.iloc[rows_of[(policy, pos, feat)]]
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
        st = stats[(policy, pos, feat)]
        levels = st["r"]
        if levels > cfg.max_feature_levels:
            out.append(row("a.context_independence", scope, None, cfg.cramers_v_max, WARN,
                           f"{levels} levels > {cfg.max_feature_levels}: not tested; bucket the feature or raise "
                           f"max_feature_levels"))
            continue
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
    days = days[days >= 2]
    time_stats = sparse_chi2(slot[slot.set_index(["logging_policy", "position"]).index.isin(days.index)],
                             ["logging_policy", "position"], "dt", "ad_id").to_dict("index") if len(days) else {}
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
        # a pair is supported when it was shown; a logged propensity of 0 says it could not have been. Pairs
        # shown with no logged propensity (propensity-free logs) are shown, hence supported: the IPS/PI family
        # says "needs propensities" itself (estimate.slate_rows), and scavenging/factored need none
        unsup = g["n"].isna() | ~(g["n"].fillna(0) > 0) | (g["max_p"].notna() & ~(g["max_p"] > 0))
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
    from .vector import dependence_table

    out = []
    table = dependence_table(strata, ["logging_policy", "j", "k"]).to_dict("index")
    for (policy, j, k), st in table.items():
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


def _calibration_cut(cfg: AssumptionConfig, tested: int, unit: str):
    """Check e's significance over a family of ``tested`` cells or ads: a mask function (|z| > calib_z and
    p < calib_alpha / tested, Bonferroni) and the words the pass messages use for it."""
    p_cut = cfg.calib_alpha / max(tested, 1)
    z_cut = max(cfg.calib_z, bonferroni_z(cfg.calib_alpha, tested))
    text = (f"{cfg.calib_z} sigma and p < {cfg.calib_alpha:g}/{tested} (|z| > {z_cut:.2f}; Bonferroni over the "
            f"{tested} {unit} tested)")
    return (lambda t: (t["z"].abs() > cfg.calib_z) & (t["p_value"] < p_cut)), text


def check_e(slot: pd.DataFrame, events: pd.DataFrame, cfg: AssumptionConfig, scope_note=None) -> list[dict]:
    """Propensity calibration per (policy, position), stratified by day (and by the calibration scope's stratum
    when the tables carry one), plus per policy the window test of :func:`window_calibration`.
    ``scope_note`` (a string, or a dict policy -> string) says in the messages where the cells were matched.

    A cell is off when |O/E - 1| > calib_tol, |z| > calib_z and its p-value (exact binomial per cell, normal for
    the window's sums) is below calib_alpha / m, m the cells tested by the check (Bonferroni; the window's ads are
    a second family). Without the m, 120,000 calibrated (day, position, ad) cells of 10M uniform events gave 10
    cells past |z| = 4 (7.6 expected by chance) and a false failure."""
    out = []
    cells = calibration_cells(slot, events, cfg.min_expected)
    strat = "stratum" in cells.columns

    def _where(policy):
        note = scope_note.get(policy, "") if isinstance(scope_note, dict) else (scope_note or "")
        return f" ({note})" if note else ""

    # a policy whose propensity varies within most cells seen twice or more logs input- or history-dependent
    # propensities (e.g. OBD's Bernoulli Thompson Sampling): the few cells that look constant are those seen
    # rarely, and testing them would only report the dependence, not a calibration error
    seen_twice = cells[cells["n_p"] >= 2]
    varying_share = (~seen_twice["constant"]).groupby(seen_twice["logging_policy"]).mean()
    dependent = set(varying_share[varying_share > cfg.calib_max_varying].index)
    tested = cells["testable"] & ~cells["logging_policy"].isin(dependent)
    significant, family = _calibration_cut(cfg, int(tested.sum()), "cells")
    # per (policy, position) at once: the rows of groups with nothing to test are written from these counts, so
    # only groups holding a testable cell (at least 5 expected impressions each) get the per-group work below
    keys = ["logging_policy", "position"]
    counts = cells.assign(_varying=~cells["constant"]).groupby(keys, sort=True).agg(
        cells_n=("constant", "size"), varying=("_varying", "sum"), testable=("testable", "sum"))
    rows_of = cells.groupby(keys, sort=True).indices if len(cells) else {}
    for (policy, pos), c in counts.iterrows():
        scope = f"policy={policy} position={pos}"
        where = _where(policy)
        varying = int(c["varying"])
        if policy not in dependent and not c["testable"]:
            out.append(row("e.calibration", scope, None, cfg.calib_tol, WARN,
                           f"no testable cell{where}: {varying} of {int(c['cells_n'])} (day, ad) cells have a "
                           f"propensity that varies (logging is not input-independent) or too few expected "
                           f"impressions"))
            continue
        g = cells.iloc[rows_of[(policy, pos)]] if policy not in dependent else None
        sum_p = g[g["constant"]].groupby(["dt", "stratum"] if strat else ["dt"])["p"].sum() if g is not None \
            else None
        t = g[g["testable"]] if g is not None else None
        if policy in dependent:
            share = float(varying_share[policy])
            out.append(row("e.calibration", scope, share, cfg.calib_max_varying, WARN,
                           f"not testable{where}: the logged propensity varies within {share:.0%} of this policy's "
                           f"(day, position, ad) cells seen twice or more (> {cfg.calib_max_varying:.0%}), so its "
                           f"logging depends on the context or on time within a day; observed frequencies cannot "
                           f"confirm per-event propensities (importance weights still use them as logged)"))
            continue
        if t.empty:
            out.append(row("e.calibration", scope, None, cfg.calib_tol, WARN,
                           f"no testable cell{where}: {varying} of {len(g)} (day, ad) cells have a propensity that "
                           f"varies (logging is not input-independent) or too few expected impressions"))
            continue
        sig = t[significant(t)]
        bad = sig[sig["rel"].abs() > cfg.calib_tol]
        # statistic: the largest relative deviation among cells whose deviation is significant (see above)
        stat = float(sig["rel"].abs().max()) if not sig.empty else 0.0
        max_rel = float(t["rel"].abs().max())
        chi2 = float((t["z"] ** 2).sum())
        over = sum_p[sum_p > 1 + 1e-6]
        if not over.empty:
            worst_key = over.idxmax()
            in_stratum = f" in stratum {worst_key[1]}" if strat else ""
            out.append(row("e.calibration", scope, float(over.max()), 1.0, FAIL,
                           f"logged propensities of the shown ads sum to {float(over.max()):.4f} > 1{in_stratum} on "
                           f"{len(over)} (day{', stratum' if strat else ''}) group(s){where}: the serving system "
                           f"logs wrong propensities"))
        elif not bad.empty:
            w = bad.loc[bad["rel"].abs().idxmax()]
            in_stratum = f" (stratum {w['stratum']})" if strat else ""
            out.append(row("e.calibration", scope, stat, cfg.calib_tol, FAIL,
                           f"{len(bad)} of {len(t)} (day, ad) cells off{where}: e.g. ad {w['ad_id']}{in_stratum} on "
                           f"{w['dt']} shown {int(w['n'])} times, {w['expected']:.1f} expected from its logged "
                           f"propensity {w['p']:.4g} (z={w['z']:.1f}, p={w['p_value']:.2g}); the logged propensities "
                           f"are not the serving probabilities -- fix the logging before using importance weights"))
        else:
            out.append(row("e.calibration", scope, stat, cfg.calib_tol, PASS,
                           f"{len(t)} (day, ad) cells{where}, none off by more than {family} and "
                           f"{cfg.calib_tol:.0%} (max |O/E-1|={max_rel:.4f}, sum z^2={chi2:.1f})"
                           + (f"; {varying} cells not tested (propensity varies)" if varying else "")))
    if cells.empty:
        return out
    window = window_calibration(cells, cfg.min_expected)
    tested = window["testable"] & ~window["logging_policy"].isin(dependent)
    significant, family = _calibration_cut(cfg, int(tested.sum()), "ads")
    window = window[window["logging_policy"].isin(set(window.loc[tested, "logging_policy"]))]   # the rest: skipped
    for policy, g in window.groupby("logging_policy", sort=True):
        scope = f"policy={policy}"
        where = _where(policy)
        t = g[g["testable"]]
        if t.empty or policy in dependent:
            continue            # the per-position rows above already say why nothing is testable
        sig = t[significant(t)]
        bad = sig[sig["rel"].abs() > cfg.calib_tol]
        stat = float(sig["rel"].abs().max()) if not sig.empty else 0.0
        if not bad.empty:
            w = bad.loc[bad["rel"].abs().idxmax()]
            in_stratum = f" (stratum {w['stratum']})" if strat else ""
            out.append(row("e.calibration_window", scope, stat, cfg.calib_tol, FAIL,
                           f"{len(bad)} of {len(t)} ads off over the window's days and positions{where}: e.g. ad "
                           f"{w['ad_id']}{in_stratum} shown {int(w['n'])} times, {w['expected']:.1f} expected from "
                           f"its logged propensities (z={w['z']:.1f}, p={w['p_value']:.2g}, O/E-1={w['rel']:.3f}); "
                           f"the logged propensities are not the serving probabilities -- fix the logging before "
                           f"using importance weights"))
        else:
            out.append(row("e.calibration_window", scope, stat, cfg.calib_tol, PASS,
                           f"{len(t)} ads over the window's days and positions{where}, none off by more than "
                           f"{family} and {cfg.calib_tol:.0%} (max |O/E-1|="
                           f"{float(t['rel'].abs().max()):.4f}, sum z^2={float((t['z'] ** 2).sum()):.1f})"))
    return out
