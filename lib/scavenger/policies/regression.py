"""Regression reduction (seed 000, "Reduction to Regression"; MATH.md "Choosing m ads from n candidates").

g(x, a) = the intrinsic (position-free) click rate of ad a in context x. Under the factoring assumption
P(click | x, a at i) = C_i P(x, a) (seed 001 section 4), a logged slot gives a Poisson/Bernoulli count with mean
C_i P(x, a), so g is fitted as a Poisson GLM with log link and offset log C_i:

    log E[r | x, a, i] = log C_i + b + w . phi(x, a),     g(x, a) = exp(b + w . phi(x, a)),

phi(x, a) = one-hot of "ad=a" and "ad=a|t" for every context token t (ad effects and ad x context interactions;
see ``features``). On the aggregated rows (n slots with the same (x, a, i), s_r their rewards) the objective is

    L(b, w) = (1/N) sum_rows [n C_i exp(eta) - s_r (log C_i + eta)] + (reg_param / 2) |w|^2,   N = sum n,

the mean Poisson negative log-likelihood per slot (constants dropped) plus an L2 term on w (the intercept b is not
penalised); minimised by Newton's method (``learning.newton``) in numpy/scipy.

h_g(x) = the m eligible ads with the largest g (``eligibility.top_m``). An ad eligible at scoring time but absent
from training gets the fallback score "prior mean": the mean of g over the trained ads scored in that context.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import DataCheckFailed
from .features import ad_cross_tokens, design, vocabulary
from .learning import newton, read_model, save_model

METHOD = "regression"


@dataclass
class RegressionConfig:
    reg_param: float = 1e-4
    max_iter: int = 25


@dataclass
class PoissonModel:
    vocabulary: list
    intercept: float
    coef: np.ndarray
    info: dict = field(default_factory=dict)

    def log_g(self, ads, tokens) -> np.ndarray:
        """log g(x, a) for pairs (ad, context tokens)."""
        X = design([ad_cross_tokens(a, t) for a, t in zip(ads, tokens)], self.vocabulary)
        return self.intercept + X @ self.coef

    def score(self, contexts: pd.DataFrame, ads: pd.DataFrame) -> pd.DataFrame:
        """g(x, a) for every (context, ad): ctx_key, context_id, ad_id, score, known. ``contexts``: ctx_key,
        context_id, tokens; ``ads``: ad_id, known (seen in training). Unknown ads: the context's mean g over the
        known ads (0 when it has none)."""
        grid = contexts[["ctx_key", "context_id", "tokens"]].merge(ads[["ad_id", "known"]], how="cross")
        g = np.exp(self.log_g(grid["ad_id"], grid["tokens"]))
        grid = grid.drop(columns="tokens").assign(score=g)
        known = grid["known"].astype(bool)
        prior = grid[known].groupby("ctx_key")["score"].mean()
        grid.loc[~known, "score"] = grid.loc[~known, "ctx_key"].map(prior).fillna(0.0).to_numpy(float)
        return grid[["ctx_key", "context_id", "ad_id", "score", "known"]].reset_index(drop=True)

    def save(self, model_dir: str, meta: dict) -> str:
        return save_model(model_dir, {**meta, "learner": self.info, "vocabulary": list(self.vocabulary)},
                          {"intercept": np.array([self.intercept]), "coef": self.coef})

    @classmethod
    def load(cls, model_dir: str) -> "PoissonModel":
        meta, arrays = read_model(model_dir)
        return cls(meta["vocabulary"], float(arrays["intercept"][0]), arrays["coef"], meta.get("learner", {}))


def fit_regression(agg: pd.DataFrame, tokens: dict, config: RegressionConfig = RegressionConfig()) -> PoissonModel:
    """Fit g on the aggregated rows (``learning.aggregated``: ctx_key, ad_id, position, coef, n, s_r);
    ``tokens``: ctx_key -> context tokens."""
    rows = [ad_cross_tokens(a, tokens[c]) for c, a in zip(agg["ctx_key"], agg["ad_id"])]
    vocab = vocabulary(rows)
    X = design(rows, vocab)
    n, s = agg["n"].to_numpy(float), agg["s_r"].to_numpy(float)
    offset = np.log(agg["coef"].to_numpy(float)) + np.log(n)       # n C_i exp(eta) = exp(eta + log C_i + log n)
    N, lam = float(n.sum()), float(config.reg_param)
    if not s.sum() > 0:
        raise DataCheckFailed("no rewards in the training window: the regression reduction has nothing to learn")

    def fun(beta):
        eta = beta[0] + X @ beta[1:]
        mu = np.exp(np.minimum(eta + offset, 700.0))
        r = (mu - s) / N
        value = (mu.sum() - s @ eta) / N + 0.5 * lam * beta[1:] @ beta[1:]
        return value, np.concatenate([[r.sum()], X.T @ r + lam * beta[1:]])

    def hessp(beta, v):
        mu = np.exp(np.minimum(beta[0] + X @ beta[1:] + offset, 700.0)) / N
        t = mu * (v[0] + X @ v[1:])
        return np.concatenate([[t.sum()], X.T @ t + lam * v[1:]])

    x0 = np.zeros(len(vocab) + 1)
    x0[0] = np.log(s.sum() / np.exp(offset).sum())
    beta, info = newton(fun, x0, hessp, config.max_iter)
    info = {"solver": "poisson_glm_offset_log_adc", "optimizer": "newton_trust_region_cg", "n_features": len(vocab),
            "n_rows": int(len(agg)), "reg_param": lam, "max_iter": config.max_iter, **info}
    return PoissonModel(vocab, float(beta[0]), beta[1:], info)
