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
Examples of one context share x, so round k's data is a matrix Y (contexts x classes) of summed weights, and

    L(W, b) = (1/S) sum_x [ (sum_a Y_xa) logsumexp(z_x) - sum_a Y_xa z_xa ] + (reg_param/2) (|W|^2 + (sum_a b_a)^2),

z_x = phi(x) W + b, phi(x) the one-hot context tokens, S = sum of the weights; (sum_a b_a)^2 only fixes the
softmax's free shift of the intercepts (it is 0 at the optimum). Newton's method in numpy (``learning.newton``).

Set Select Train: gamma_0 = {}; for k = 1..m: drop the examples whose ad is in gamma_{k-1}(x), fit Psi_k,
gamma_k(x) = gamma_{k-1}(x) + {Psi_k(x)} (Psi_k(x) = argmax over all classes, on the training contexts).
Set Select Test (``eligibility.set_select_test``): Psi_k(x) = argmax over the event's eligible ads of p_k(. | x);
duplicates replaced by unused eligible ads. Ads eligible at test time but unknown to the classifier (never clicked
in training) get the fallback score 1 / n_classes (the mean of p_k over the classes).
Bound (seed 000): r_ad(h^Psi) <= m q(Psi), q the mean cost-sensitive regret of the rounds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import DataCheckFailed
from .features import design, vocabulary
from .learning import newton, read_model, save_model

METHOD = "cost_sensitive"


@dataclass
class CostSensitiveConfig:
    reg_param: float = 1e-4
    max_iter: int = 60


@dataclass
class SetSelectModel:
    vocabulary: list                                  # context tokens
    classes: list                                     # ads (sorted), the classes of every round
    rounds: list = field(default_factory=list)        # (W: features x classes, b: classes) per round k = 1..m
    info: dict = field(default_factory=dict)

    def probabilities(self, tokens: list) -> list:
        """p_k(. | x) per round: arrays (contexts x classes)."""
        X = design(tokens, self.vocabulary)
        return [_softmax(X @ W + b) for W, b in self.rounds]

    def score(self, contexts: pd.DataFrame, ads: pd.DataFrame) -> pd.DataFrame:
        """ctx_key, context_id, ad_id, known, score_1..score_m (unknown ads: 1 / n_classes)."""
        probs = self.probabilities(list(contexts["tokens"]))
        index = {a: j for j, a in enumerate(self.classes)}
        col = np.array([index.get(a, -1) for a in ads["ad_id"]])
        known = col >= 0
        out = {"ctx_key": np.repeat(contexts["ctx_key"].to_numpy(), len(ads)),
               "context_id": np.repeat(contexts["context_id"].to_numpy(), len(ads)),
               "ad_id": np.tile(ads["ad_id"].to_numpy(), len(contexts)), "known": np.tile(known, len(contexts))}
        fallback = 1.0 / max(len(self.classes), 1)
        for k, P in enumerate(probs, start=1):
            out[f"score_{k}"] = np.where(known[None, :], P[:, np.maximum(col, 0)], fallback).reshape(-1)
        return pd.DataFrame(out)

    def save(self, model_dir: str, meta: dict) -> str:
        arrays = {}
        for k, (W, b) in enumerate(self.rounds, start=1):
            arrays[f"W_{k}"], arrays[f"b_{k}"] = W, b
        return save_model(model_dir, {**meta, "learner": self.info, "vocabulary": list(self.vocabulary),
                                      "classes": list(self.classes), "rounds": len(self.rounds)}, arrays)

    @classmethod
    def load(cls, model_dir: str) -> "SetSelectModel":
        meta, a = read_model(model_dir)
        rounds = [(a[f"W_{k}"], a[f"b_{k}"]) for k in range(1, int(meta["rounds"]) + 1)]
        return cls(meta["vocabulary"], meta["classes"], rounds, meta.get("learner", {}))


def _softmax(Z: np.ndarray) -> np.ndarray:
    Z = Z - Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def ips_examples(agg: pd.DataFrame) -> pd.DataFrame:
    """Weighted examples per (context, ad): w = sum over the slots of r / (C_i mu_i(a|x) K_t) (``s_w`` of the
    aggregate); only positive weights (slots without a propensity carry none)."""
    ex = agg.groupby(["ctx_key", "ad_id"], as_index=False, sort=True)["s_w"].sum().rename(columns={"s_w": "w"})
    return ex[ex["w"] > 0].reset_index(drop=True)


def fit_round(X, Y: np.ndarray, lam: float, max_iter: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """One round's weighted multinomial logistic regression (module docstring) on contexts X and weights Y."""
    p, K = X.shape[1], Y.shape[1]
    t, S = Y.sum(axis=1), float(Y.sum())
    if not S > 0:
        return np.zeros((p, K)), np.zeros(K), {"iterations": 0, "converged": True, "max_abs_gradient": 0.0}

    def unpack(x):
        return x[:p * K].reshape(p, K), x[p * K:]

    def fun(x):
        W, b = unpack(x)
        Z = X @ W + b
        zmax = Z.max(axis=1, keepdims=True)
        lse = zmax[:, 0] + np.log(np.exp(Z - zmax).sum(axis=1))
        G = (t[:, None] * np.exp(Z - lse[:, None]) - Y) / S
        value = (t @ lse - np.sum(Y * Z)) / S + 0.5 * lam * (np.sum(W * W) + b.sum() ** 2)
        return value, np.concatenate([(X.T @ G + lam * W).ravel(), G.sum(axis=0) + lam * b.sum()])

    def hessp(x, v):
        W, b = unpack(x)
        VW, vb = unpack(v)
        P = _softmax(X @ W + b)
        U = X @ VW + vb
        PU = P * U
        T = t[:, None] * (PU - P * PU.sum(axis=1, keepdims=True)) / S
        return np.concatenate([(X.T @ T + lam * VW).ravel(), T.sum(axis=0) + lam * vb.sum()])

    x, info = newton(fun, np.zeros(p * K + K), hessp, max_iter)
    W, b = unpack(x)
    return W, b, info


def fit_cost_sensitive(agg: pd.DataFrame, tokens: dict, m: int,
                       config: CostSensitiveConfig = CostSensitiveConfig()) -> SetSelectModel:
    """Set Select Train on the aggregated rows (``learning.aggregated``); ``tokens``: ctx_key -> context tokens."""
    ex = ips_examples(agg)
    if not len(ex):
        raise DataCheckFailed("no rewarded slot with a logged propensity in the training window: the cost-sensitive "
                              "reduction has no importance-weighted example to learn from")
    # every ad shown with a logged propensity is a class: one never clicked has weight 0, an estimated value of 0
    # (the worst), not the unknown ads' fallback score 1 / n_classes that would put it above clicked ads
    seen = agg.loc[agg["n"] > agg["n_no_propensity"], "ad_id"] if "n_no_propensity" in agg else agg["ad_id"]
    classes = sorted(set(ex["ad_id"]) | set(seen))
    keys = sorted(ex["ctx_key"].unique())
    vocab = vocabulary(tokens[c] for c in keys)
    X = design([tokens[c] for c in keys], vocab)
    Y = np.zeros((len(keys), len(classes)))
    Y[pd.Index(keys).get_indexer(ex["ctx_key"]), pd.Index(classes).get_indexer(ex["ad_id"])] = ex["w"].to_numpy()
    gamma = np.zeros_like(Y, dtype=bool)       # gamma_{k-1}(x): classes already chosen for context x
    rounds, infos = [], []
    for _ in range(int(m)):
        W, b, info = fit_round(X, np.where(gamma, 0.0, Y), float(config.reg_param), config.max_iter)
        rounds.append((W, b))
        infos.append(info)
        gamma[np.arange(len(keys)), np.argmax(X @ W + b, axis=1)] = True
    info = {"learner": "importance_weighted_multinomial_logistic_regression", "optimizer": "newton_trust_region_cg",
            "n_classes": len(classes), "n_features": len(vocab), "n_contexts": len(keys),
            "reg_param": float(config.reg_param), "iterations": [i["iterations"] for i in infos],
            "converged": all(i["converged"] for i in infos),
            "max_abs_gradient": max([i["max_abs_gradient"] for i in infos] or [0.0])}
    return SetSelectModel(vocab, classes, rounds, info)
