"""Regression reduction (seed 000, "Reduction to Regression"; MATH.md "Choosing m ads from n candidates").

g(x, a) = the intrinsic (position-free) click rate of ad a in context x. Under the factoring assumption
P(click | x, a at i) = C_i P(x, a) (seed 001 section 4), a logged slot gives a Poisson/Bernoulli count with mean
C_i P(x, a), so g is fitted as a Poisson GLM with log link and offset log C_i:

    log E[r | x, a, i] = log C_i + w . phi(x, a),     g(x, a) = exp(w . phi(x, a)),

phi(x, a) = one-hot of "ad=a" and "ad=a|t" for every context token t (ad effects and ad x context interactions;
see ``features``). Spark ML ``GeneralizedLinearRegression`` (IRLS) fits it from the exploded slots without
collecting them. When the one-hot vocabulary exceeds IRLS's 4096-feature limit the learner falls back to a weighted
least-squares fit of r / C_i (mean P(x, a); weight C_i, ~ inverse variance) with L-BFGS, and says so.

h_g(x) = the m eligible ads with the largest g (``eligibility.top_m``). An ad eligible at scoring time but absent
from training gets the fallback score "prior mean": the mean of g over the trained ads in that context.
"""
from __future__ import annotations

from dataclasses import dataclass

from .features import ad_cross_tokens_col

IRLS_MAX_FEATURES = 4096


@dataclass
class RegressionConfig:
    reg_param: float = 1e-4
    max_iter: int = 25
    min_df: float = 1.0          # CountVectorizer minDF (tokens seen in fewer rows are dropped)
    solver: str = "auto"         # auto | glm | linear


def _with_tokens(rows):
    from pyspark.sql import functions as F

    return rows.select(*[F.col(c) for c in rows.columns], ad_cross_tokens_col().alias("tokens"))


def fit_regression(rows, config: RegressionConfig = RegressionConfig()):
    """Fit g on aggregated slot rows (``features.aggregate_slots(usable(slot_rows(...)))``).

    Returns (PipelineModel, info dict)."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import CountVectorizer
    from pyspark.ml.regression import GeneralizedLinearRegression, LinearRegression
    from pyspark.sql import functions as F

    # rows: aggregated slots (features.aggregate_slots); Poisson log-likelihood of a group of n slots with the
    # same (x, a, i): s_r (log C_i + eta) - n C_i exp(eta) = n [ybar (log C_i + eta) - C_i exp(eta)], ybar = s_r / n:
    # a weighted Poisson GLM with label ybar and weight n has the same maximiser as the per-slot fit.
    data = _with_tokens(rows).select(F.col("tokens"), (F.col("s_r") / F.col("n")).alias("ybar"),
                                     F.col("n").cast("double").alias("n"), F.col("coef"),
                                     F.log(F.col("coef")).alias("offset"),
                                     (F.col("s_r") / (F.col("n") * F.col("coef"))).alias("r_adj"),
                                     (F.col("n") * F.col("coef")).alias("w_ls"))
    cv = CountVectorizer(inputCol="tokens", outputCol="features", binary=True, minDF=config.min_df,
                         vocabSize=1 << 20).fit(data)
    n_features = len(cv.vocabulary)
    solver = config.solver
    if solver == "auto":
        solver = "glm" if n_features <= IRLS_MAX_FEATURES else "linear"
    vec = cv.transform(data)
    if solver == "glm":
        est = GeneralizedLinearRegression(family="poisson", link="log", featuresCol="features", labelCol="ybar",
                                          weightCol="n", offsetCol="offset", regParam=config.reg_param, maxIter=config.max_iter,
                                          predictionCol="g")
    elif solver == "linear":
        est = LinearRegression(featuresCol="features", labelCol="r_adj", weightCol="w_ls",
                               regParam=config.reg_param, maxIter=max(config.max_iter, 100), solver="l-bfgs",
                               predictionCol="g")
    else:
        raise ValueError(f"unknown regression solver {solver!r}")
    fitted = est.fit(vec)
    info = {"solver": "poisson_glm_offset_log_adc" if solver == "glm" else "weighted_least_squares_r_over_adc",
            "n_features": n_features, "reg_param": config.reg_param, "max_iter": config.max_iter}
    if solver == "glm":
        info["iterations"] = int(fitted.summary.numIterations)
    return PipelineModel(stages=[cv, fitted]), info


def score(model, contexts, ads):
    """g(x, a) for every (context, candidate ad): DataFrame context_key, ad_id, score, known.

    ``contexts``: context_key, ctx_tokens (distinct contexts of the scoring window); ``ads``: ad_id, known
    (known = seen in training). Unknown ads get the context's mean g over known ads (prior mean)."""
    from pyspark.sql import functions as F

    grid = contexts.crossJoin(F.broadcast(ads)).select(
        F.col("context_key"), F.col("ctx_tokens"), F.col("ad_id"), F.col("known"), F.lit(0.0).alias("offset"))
    pred = model.transform(_with_tokens(grid)).select(F.col("context_key"), F.col("ad_id"), F.col("known"),
                                                      F.col("g"))
    prior = (pred.where(F.col("known")).groupBy(F.col("context_key"))
             .agg(F.avg(F.col("g")).alias("g_prior")))
    return (pred.join(prior, on="context_key", how="left")
            .select(F.col("context_key"), F.col("ad_id"),
                    F.when(F.col("known"), F.col("g")).otherwise(F.coalesce(F.col("g_prior"), F.lit(0.0)))
                    .alias("score"),
                    F.col("known")))
