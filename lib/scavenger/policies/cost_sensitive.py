"""Cost-sensitive reduction: Set Select Train / Set Select Test (seed 000; MATH.md "Choosing m ads").

Costs. For ad a in event x the (negative) value is f(a) = -P(x, a), the position-free click rate. The logs show f
only for the shown ads, so it is importance weighted with the logged per-position propensity mu_i(a | x):

    f^(a) = -(1/K_t) sum_i 1[a at position i] (r_i / C_i) / mu_i(a | x),    E[f^(a) | x] = -P(x, a),

(unbiased for every ad with mu_i(a|x) > 0 at every position; K_t = slate size). Round k's costs are
c_a(x, k) = 1[a not in gamma_{k-1}(x)] f^(a).

Learner (cost-sensitive multiclass, reduction to importance-weighted multiclass classification). With f <= 0
(rewards >= 0: the seed's condition) the classifier that minimises expected cost picks argmax_a E[-c_a(x,k) | x];
a multinomial logistic regression trained on the examples (x, label = the shown ad a, weight = -c_a(x, k)) -- only
clicked slots have non-zero weight, and ads in gamma_{k-1}(x) get weight 0 -- has population optimum
p_k(a | x) = E[-c_a(x,k) | x] / sum_b E[-c_b(x,k) | x], so argmax_a p_k(a|x) is the cost-sensitive optimum: Psi_k.
Spark ML ``LogisticRegression(family="multinomial", weightCol=...)`` on the one-hot context tokens.

Set Select Train: gamma_0 = {}; for k = 1..m: drop the examples whose ad is in gamma_{k-1}(x), fit Psi_k,
gamma_k(x) = gamma_{k-1}(x) + {Psi_k(x)} (Psi_k's prediction on the training examples, computed by Spark).
Set Select Test (``eligibility.set_select_test``): Psi_k(x) = argmax over the event's eligible ads of p_k(. | x);
duplicates replaced by unused eligible ads at random (seeded). Ads eligible at test time but unknown to the
classifier (never clicked in training) get the fallback score 1 / n_classes (the mean of p_k over the classes).
Bound (seed 000): r_ad(h^Psi) <= m q(Psi), q the mean cost-sensitive regret of the rounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CostSensitiveConfig:
    reg_param: float = 1e-4
    max_iter: int = 60
    min_df: float = 1.0


@dataclass
class CostSensitiveModel:
    vectorizer: object            # CountVectorizerModel on ctx_tokens
    labels: object                # StringIndexerModel ad_id -> label
    rounds: list = field(default_factory=list)   # LogisticRegressionModel per round k = 1..m
    info: dict = field(default_factory=dict)

    def save(self, path: str) -> None:
        self.vectorizer.write().overwrite().save(f"{path}/features")
        self.labels.write().overwrite().save(f"{path}/labels")
        for k, model in enumerate(self.rounds, start=1):
            model.write().overwrite().save(f"{path}/round_{k}")

    @classmethod
    def load(cls, path: str, m: int) -> "CostSensitiveModel":
        from pyspark.ml.classification import LogisticRegressionModel
        from pyspark.ml.feature import CountVectorizerModel, StringIndexerModel

        return cls(CountVectorizerModel.load(f"{path}/features"), StringIndexerModel.load(f"{path}/labels"),
                   [LogisticRegressionModel.load(f"{path}/round_{k}") for k in range(1, m + 1)])


def ips_examples(agg_rows):
    """Weighted examples per (context, ad): ctx_tokens, ad_id, w = sum over clicked slots of r / (C_i mu_i(a|x) K_t)
    (from ``features.aggregate_slots``; equal examples add their weights, which leaves the weighted
    log-likelihood unchanged). Slots with a null or non-positive propensity carry no weight."""
    from pyspark.sql import functions as F

    return (agg_rows.groupBy(F.col("context_key"), F.col("ctx_tokens"), F.col("ad_id"))
            .agg(F.sum(F.col("s_w")).alias("w"))
            .where(F.col("w") > 0))


def fit_cost_sensitive(rows, m: int, config: CostSensitiveConfig = CostSensitiveConfig()) -> CostSensitiveModel:
    """Set Select Train on aggregated slot rows (``features.aggregate_slots``); returns the m round classifiers."""
    from pyspark import StorageLevel
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import CountVectorizer, StringIndexer
    from pyspark.sql import functions as F

    examples = ips_examples(rows)
    vectorizer = CountVectorizer(inputCol="ctx_tokens", outputCol="features", binary=True,
                                 minDF=config.min_df).fit(examples)
    labels = StringIndexer(inputCol="ad_id", outputCol="label", stringOrderType="alphabetAsc").fit(examples)
    data = labels.transform(vectorizer.transform(examples)).select(
        F.col("features"), F.col("label"), F.col("w"), F.array().cast("array<double>").alias("gamma"))
    current = data.persist(StorageLevel.MEMORY_AND_DISK)
    rounds, iterations = [], []
    try:
        for k in range(1, m + 1):
            train_k = current.where(~F.array_contains(F.col("gamma"), F.col("label")))
            lr = LogisticRegression(family="multinomial", featuresCol="features", labelCol="label", weightCol="w",
                                    regParam=config.reg_param, maxIter=config.max_iter,
                                    predictionCol="pred", probabilityCol="prob", rawPredictionCol="raw")
            model = lr.fit(train_k)
            rounds.append(model)
            iterations.append(int(model.summary.totalIterations))
            if k < m:  # gamma_k(x) = gamma_{k-1}(x) + {Psi_k(x)} on the training examples
                nxt = model.transform(current).select(
                    F.col("features"), F.col("label"), F.col("w"),
                    F.array_union(F.col("gamma"), F.array(F.col("pred"))).alias("gamma"))
                nxt = nxt.persist(StorageLevel.MEMORY_AND_DISK)
                nxt.count()
                current.unpersist()
                current = nxt
    finally:
        current.unpersist()
    info = {"learner": "importance_weighted_multinomial_logistic_regression", "n_classes": len(labels.labels),
            "n_features": len(vectorizer.vocabulary), "reg_param": config.reg_param, "iterations": iterations}
    return CostSensitiveModel(vectorizer, labels, rounds, info)


def score(model: CostSensitiveModel, contexts, ads, m: int):
    """Round scores p_k(a | x): DataFrame context_key, ad_id, known, score_1..score_m (unknown ads: 1/n_classes)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    feats = model.vectorizer.transform(contexts.select(F.col("context_key"), F.col("ctx_tokens")))
    cols = [F.col("context_key")]
    for k, rm in enumerate(model.rounds, start=1):
        rm = rm.copy()
        rm.setProbabilityCol(f"prob_{k}").setPredictionCol(f"pred_{k}").setRawPredictionCol(f"raw_{k}")
        feats = rm.transform(feats)
        cols.append(vector_to_array(F.col(f"prob_{k}")).alias(f"p_{k}"))
    probs = feats.select(*cols)
    n_classes = len(model.labels.labels)
    spark = contexts.sparkSession
    index = spark.createDataFrame([(a, float(i)) for i, a in enumerate(model.labels.labels)],
                                  "ad_id string, label double")  # n_classes rows
    ads_idx = ads.select(F.col("ad_id")).join(F.broadcast(index), on="ad_id", how="left")
    grid = probs.crossJoin(F.broadcast(ads_idx))
    known = F.col("label").isNotNull()
    out = [F.col("context_key"), F.col("ad_id"), known.alias("known")]
    for k in range(1, len(model.rounds) + 1):
        p = F.try_element_at(F.col(f"p_{k}"), (F.col("label") + 1).cast("int"))
        out.append(F.when(known, p).otherwise(F.lit(1.0 / max(n_classes, 1))).alias(f"score_{k}"))
    return grid.select(*out)
