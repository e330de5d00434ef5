"""Training rows and features for the policy learners, built with Spark SQL from the impression logs.

Context x: the ``context`` map (categorical features name -> value). Tokens of x (strings, one-hot later by a
``CountVectorizer`` with binary counts):
  interactions 1:     "k=v" for every entry;
  interactions 2:     also "k1=v1&k2=v2" for every pair of entries (sorted by key);
  interactions full:  also "@<context_key>" (one indicator per distinct context: a tabular model).
The context key is ``context_id`` when present, else the JSON of the sorted map entries.

The regression reduction crosses every context token with the ad ("ad=<a>" plus "ad=<a>|<token>"); the
cost-sensitive classifier uses the context tokens alone (the class is the ad).

Position correction (MATH.md "Factoring assumption"): P(click | x, a at i) = C_i P(x, a). ``resolve_adc`` turns
the ``--adc`` flag (numbers, a stored ADC table, or 'estimate') into the vector C_1..C_K.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import UsageError

INTERACTIONS = ("1", "2", "full")


def context_key_col():
    """coalesce(context_id, to_json(sorted map entries)): the key of a distinct context."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("context_id"),
                      F.to_json(F.array_sort(F.map_entries(F.coalesce(
                          F.col("context"), F.create_map().cast("map<string,string>"))))))


def context_tokens_col(interactions: str = "2"):
    """Array of context tokens (see module docstring) from columns ``context`` and ``context_key``."""
    from pyspark.sql import functions as F

    if interactions not in INTERACTIONS:
        raise UsageError(f"--interactions must be one of {', '.join(INTERACTIONS)}; got {interactions!r}")
    entries = F.array_sort(F.map_entries(F.coalesce(F.col("context"),
                                                    F.create_map().cast("map<string,string>"))))
    singles = F.transform(entries, lambda e: F.concat(e["key"], F.lit("="), F.coalesce(e["value"], F.lit(""))))
    tokens = singles
    if interactions in ("2", "full"):
        pairs = F.flatten(F.transform(singles, lambda x, i: F.transform(
            F.filter(singles, lambda y, j: j > i), lambda y: F.concat(x, F.lit("&"), y))))
        tokens = F.concat(tokens, pairs)
    if interactions == "full":
        tokens = F.concat(tokens, F.array(F.concat(F.lit("@"), F.col("context_key"))))
    return tokens


def ad_cross_tokens_col(ad_col: str = "ad_id", tokens_col: str = "ctx_tokens"):
    """["ad=<a>"] + ["ad=<a>|<t>" for t in context tokens]: ad effects and ad x context interactions."""
    from pyspark.sql import functions as F

    head = F.concat(F.lit("ad="), F.col(ad_col))
    return F.concat(F.array(head), F.transform(F.col(tokens_col), lambda t: F.concat(head, F.lit("|"), t)))


def adc_array_col(adc: np.ndarray):
    """The ADC vector as an array literal (index 1..K)."""
    from pyspark.sql import functions as F

    return F.array(*[F.lit(float(c)) for c in adc])


def slot_rows(logs, adc: np.ndarray, interactions: str = "2"):
    """One row per logged slot: dt, event_id, context_key, ctx_tokens, position, ad_id, propensity, reward,
    coef = C_position, k = slate size. Slots whose position has no ADC or whose reward is null are dropped
    (``slot_row_counts`` reports them)."""
    from pyspark.sql import functions as F

    events = logs.select(F.col("dt"), F.col("event_id"), context_key_col().alias("context_key"),
                         F.col("context"), F.col("slots"))
    events = events.select(F.col("dt"), F.col("event_id"), F.col("context_key"),
                           context_tokens_col(interactions).alias("ctx_tokens"),
                           F.size(F.col("slots")).alias("k"), F.explode(F.col("slots")).alias("s"))
    coef = F.try_element_at(adc_array_col(adc), F.col("s.position"))
    return events.select(
        F.col("dt"), F.col("event_id"), F.col("context_key"), F.col("ctx_tokens"), F.col("k"),
        F.col("s.position").alias("position"), F.col("s.ad_id").alias("ad_id"),
        F.col("s.propensity").alias("propensity"), F.col("s.reward").alias("reward"),
        F.when(F.col("s.position") >= 1, coef).alias("coef"),
    )


def usable(rows):
    """Rows the learners use: known position coefficient > 0 and non-null reward."""
    from pyspark.sql import functions as F

    return rows.where(F.col("coef").isNotNull() & (F.col("coef") > 0) & F.col("reward").isNotNull())


def aggregate_slots(rows):
    """Sufficient statistics of the usable slot rows: per (context_key, ctx_tokens, ad_id, position):
    coef, n = impressions, s_r = sum of rewards, s_w = sum of r / (C_i mu_i K_t) over slots with a propensity
    (the importance weights of ``cost_sensitive``). With one-hot features of (context, ad) every learner's
    objective is a sum over rows with equal (features, offset), so fitting on these weighted rows gives exactly
    the same estimate as fitting on the slots (distributed groupBy; at most contexts x ads x K rows)."""
    from pyspark.sql import functions as F

    ok_p = F.col("propensity").isNotNull() & (F.col("propensity") > 0)
    w = F.when(ok_p, F.col("reward") / (F.col("coef") * F.col("propensity") * F.col("k"))).otherwise(F.lit(0.0))
    return rows.groupBy(F.col("context_key"), F.col("ctx_tokens"), F.col("ad_id"), F.col("position")).agg(
        F.first(F.col("coef")).alias("coef"),
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("reward")).alias("s_r"),
        F.sum(w).alias("s_w"),
        F.sum(F.when(ok_p, 0).otherwise(1)).alias("n_no_propensity"),
    )


def parse_adc_numbers(text: str) -> np.ndarray:
    """'1,.613,.527' -> array; must start at 1 and be positive."""
    try:
        values = np.array([float(v) for v in text.split(",") if v.strip()], dtype=float)
    except ValueError:
        raise UsageError(f"--adc expects comma-separated numbers, a path, or 'estimate'; got {text!r}") from None
    if values.size == 0 or not math.isclose(values[0], 1.0, abs_tol=1e-9) or np.any(values <= 0):
        raise UsageError(f"--adc numbers must start with 1 and be positive; got {text!r}")
    return values


def resolve_adc(spark, spec: str, logs, method: str = "variance_optimal") -> tuple[np.ndarray, str]:
    """(C_1..C_K, source description) from numbers, a stored ADC table (Parquet with position, method,
    coefficient: the output of ``scavenger adc``), or 'estimate' (alpha-weighted ADCs of the training logs)."""
    import pandas as pd

    if spec is None or spec == "estimate":
        from ..estimators.adc import adc_table, adc_vector
        from ..statistics.window import tables_of

        tables = tables_of(logs)
        table = adc_table(tables["ad_position"], methods=(method,), bootstrap=False)
        C = adc_vector(table, method)
        if not np.all(np.isfinite(C)) or np.any(C <= 0):
            raise UsageError(f"cannot estimate ADCs from the training logs (got {list(C)}); pass --adc numbers")
        return C, f"estimate:{method}"
    if os.path.exists(spec) or "://" in spec:
        from ..contract import read_source

        df = read_source(spark, spec)
        need = {"position", "coefficient"}
        if not need.issubset(df.columns):
            raise UsageError(f"--adc table {spec} needs columns position, coefficient")
        pdf = df.toPandas()  # a few rows
        if "method" in pdf.columns:
            methods = list(pdf["method"].unique())
            pick = method if method in methods else methods[0]
            pdf = pdf[pdf["method"] == pick]
        else:
            pick = "table"
        pdf = pdf.drop_duplicates("position").sort_values("position")
        C = pd.Series(pdf["coefficient"].to_numpy(float), index=pdf["position"].astype(int))
        K = int(C.index.max())
        out = np.array([C.get(i, np.nan) for i in range(1, K + 1)], dtype=float)
        if not np.all(np.isfinite(out)) or np.any(out <= 0):
            raise UsageError(f"--adc table {spec} has missing or non-positive coefficients: {list(out)}")
        return out, f"table:{spec}:{pick}"
    return parse_adc_numbers(spec), "numbers"
