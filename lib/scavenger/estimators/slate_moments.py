"""The slate moments (seed 002; MATH.md "Slate OPE"): a small additive table of sums that the statistics layer
produces in ONE pass with built-in SQL aggregates (sum, count, max) over per-event columns, from which every slate
estimator of :mod:`.slate` reads its value and variance. Per event (events with every slot propensity present):

    Y_k = pi_k(a_k|x) / mu_k(a_k|x)   (k = 1..K)        W = prod_k Y_k        G = 1 - K + sum_k Y_k

Sums kept (flat column names of :func:`flat_columns` in brackets; j <= k for the symmetric K x K ones):

    n                      count of events with all propensities      [n]
    n_missing_propensity   count of events missing some propensity    [n_missing_propensity]
    s_r, s_r2              sum r, sum r^2                             [s_r, s_r2]
    s_Y[k], s_rY[k], s_r2Y[k]        sum Y_k, r Y_k, r^2 Y_k           [s_Y_k, s_rY_k, s_r2Y_k]
    s_YY[j,k], s_rYY[j,k], s_r2YY[j,k]  sum Y_j Y_k, r Y_j Y_k, r^2 Y_j Y_k   [s_YY_j_k, s_rYY_j_k, s_r2YY_j_k]
    s_W, s_rW, s_W2, s_rW2, s_r2W2   sum W, r W, W^2, r W^2, r^2 W^2   [same names]
    s_r2W                  sum r^2 W (IPS minus what the logs earned: sum (r W - r)^2, estimators/differences.py;
                           NaN on moments built without it, e.g. stored before statistics version 13)
    n_W_pos                count of events with W > 0                  [n_W_pos]
    max_W, max_Y[k]        max W, max Y_k                              [max_W, max_Y_k]
    n_Y_pos[k]             count of events with Y_k > 0                [n_Y_pos_k]

Two windows (days) combine by :meth:`SlateMoments.add` (sums and counts add, maxima take the max).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

_SCALARS = ("n", "n_missing_propensity", "s_r", "s_r2", "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2", "n_W_pos",
            "s_r2W")
_VECTORS = ("s_Y", "s_rY", "s_r2Y", "n_Y_pos")
_MATRICES = ("s_YY", "s_rYY", "s_r2YY")
_MAX_SCALARS = ("max_W",)
_MAX_VECTORS = ("max_Y",)


@dataclass(eq=False)
class SlateMoments:
    """Additive sums for one (policy, window); see the module docstring for every field."""

    K: int
    n: float = 0.0
    n_missing_propensity: float = 0.0
    s_r: float = 0.0
    s_r2: float = 0.0
    s_Y: np.ndarray = None
    s_rY: np.ndarray = None
    s_r2Y: np.ndarray = None
    s_YY: np.ndarray = None
    s_rYY: np.ndarray = None
    s_r2YY: np.ndarray = None
    s_W: float = 0.0
    s_rW: float = 0.0
    s_W2: float = 0.0
    s_rW2: float = 0.0
    s_r2W2: float = 0.0
    n_W_pos: float = 0.0
    max_W: float = 0.0
    max_Y: np.ndarray = None
    n_Y_pos: np.ndarray = None
    s_r2W: float = math.nan

    def __post_init__(self):
        K = int(self.K)
        if K < 1:
            raise ValueError(f"K must be >= 1, got {K}")
        self.K = K
        for name in _VECTORS + _MAX_VECTORS:
            val = getattr(self, name)
            arr = np.zeros(K) if val is None else np.asarray(val, dtype=float).reshape(K)
            setattr(self, name, arr)
        for name in _MATRICES:
            val = getattr(self, name)
            arr = np.zeros((K, K)) if val is None else np.asarray(val, dtype=float).reshape(K, K)
            setattr(self, name, arr)

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, r, Y, n_missing_propensity: int = 0) -> "SlateMoments":
        """Row-level numpy reference: r shape (n,), Y shape (n, K) of Y_k = pi_k/mu_k.

        Rows whose Y has a non-finite entry (missing propensity) are counted in n_missing_propensity and
        left out of every sum.
        """
        r = np.asarray(r, dtype=float).reshape(-1)
        Y = np.asarray(Y, dtype=float)
        if Y.ndim != 2 or Y.shape[0] != r.shape[0]:
            raise ValueError("Y must have shape (len(r), K)")
        ok = np.all(np.isfinite(Y), axis=1)
        r, Y = r[ok], Y[ok]
        W = np.prod(Y, axis=1)
        r2 = r * r
        return cls(
            K=Y.shape[1], n=float(r.shape[0]), n_missing_propensity=float(n_missing_propensity + (~ok).sum()),
            s_r=r.sum(), s_r2=r2.sum(),
            s_Y=Y.sum(0), s_rY=(r[:, None] * Y).sum(0), s_r2Y=(r2[:, None] * Y).sum(0),
            s_YY=Y.T @ Y, s_rYY=(Y * r[:, None]).T @ Y, s_r2YY=(Y * r2[:, None]).T @ Y,
            s_W=W.sum(), s_rW=(r * W).sum(), s_W2=(W * W).sum(), s_rW2=(r * W * W).sum(),
            s_r2W2=(r2 * W * W).sum(), n_W_pos=float((W > 0).sum()), s_r2W=(r2 * W).sum(),
            max_W=float(W.max()) if W.size else 0.0,
            max_Y=Y.max(0) if W.size else np.zeros(Y.shape[1]),
            n_Y_pos=(Y > 0).sum(0).astype(float),
        )

    def add(self, other: "SlateMoments") -> "SlateMoments":
        """Moments of the union of two disjoint sets of events (e.g. two days)."""
        if other.K != self.K:
            raise ValueError(f"cannot add moments with K={self.K} and K={other.K}")
        kw = {"K": self.K}
        for name in _SCALARS + _VECTORS + _MATRICES:
            kw[name] = getattr(self, name) + getattr(other, name)
        for name in _MAX_SCALARS:
            kw[name] = max(getattr(self, name), getattr(other, name))
        for name in _MAX_VECTORS:
            kw[name] = np.maximum(getattr(self, name), getattr(other, name))
        return SlateMoments(**kw)

    __add__ = add

    def to_flat(self) -> dict:
        """Flat {column: value} record with the names of :func:`flat_columns`."""
        out = {name: float(getattr(self, name)) for name in _SCALARS + _MAX_SCALARS}
        for name in _VECTORS + _MAX_VECTORS:
            for k in range(self.K):
                out[f"{name}_{k + 1}"] = float(getattr(self, name)[k])
        for name in _MATRICES:
            mat = getattr(self, name)
            for j in range(self.K):
                for k in range(j, self.K):
                    out[f"{name}_{j + 1}_{k + 1}"] = float(mat[j, k])
        return out

    @classmethod
    def from_flat(cls, record: Mapping, K: int) -> "SlateMoments":
        """Inverse of :meth:`to_flat` (e.g. one row of the statistics table); null sums read as 0."""
        def get(key):
            if key == "s_r2W" and key not in record:     # optional: moments stored before it (version 13)
                return math.nan
            val = record[key]
            return 0.0 if val is None or (isinstance(val, float) and math.isnan(val)) else float(val)

        kw = {"K": K}
        for name in _SCALARS + _MAX_SCALARS:
            kw[name] = get(name)
        for name in _VECTORS + _MAX_VECTORS:
            kw[name] = np.array([get(f"{name}_{k + 1}") for k in range(K)])
        for name in _MATRICES:
            mat = np.zeros((K, K))
            for j in range(K):
                for k in range(j, K):
                    mat[j, k] = mat[k, j] = get(f"{name}_{j + 1}_{k + 1}")
            kw[name] = mat
        return cls(**kw)


def flat_columns(K: int) -> list[str]:
    """Column names of the flat moments record for K slots (the statistics layer's aggregate aliases)."""
    return list(SlateMoments(K=K).to_flat().keys())


def moment_terms(K: int) -> list[tuple[str, str, tuple]]:
    """How to aggregate each flat column in one Spark pass: (alias, agg, factors), in flat_columns order.

    agg is "sum" (F.sum of the product of the factors), "count_pos" (F.sum of 1 if the product > 0 else 0) or
    "max" (F.max of the product). Factors are symbols: "1" (the constant 1), "r", "W" (= prod_k Y_k) and
    "Y1".."YK". Aggregate over events with all propensities present, except ``n_missing_propensity``, which
    counts (agg "sum" of the factor "missing" = 1 if some Y_k is null else 0) over all events.
    """
    terms = {
        "n": ("sum", ("1",)), "n_missing_propensity": ("sum", ("missing",)),
        "s_r": ("sum", ("r",)), "s_r2": ("sum", ("r", "r")), "s_W": ("sum", ("W",)), "s_rW": ("sum", ("r", "W")),
        "s_W2": ("sum", ("W", "W")), "s_rW2": ("sum", ("r", "W", "W")), "s_r2W2": ("sum", ("r", "r", "W", "W")),
        "s_r2W": ("sum", ("r", "r", "W")),
        "n_W_pos": ("count_pos", ("W",)), "max_W": ("max", ("W",)),
    }
    pre = {"s_Y": ("sum", ()), "s_rY": ("sum", ("r",)), "s_r2Y": ("sum", ("r", "r")),
           "n_Y_pos": ("count_pos", ()), "max_Y": ("max", ())}
    out = []
    for alias in flat_columns(K):
        if alias in terms:
            agg, factors = terms[alias]
        else:
            name, *idx = alias.rsplit("_", 2) if alias.startswith(_MATRICES) else alias.rsplit("_", 1)
            if name in pre:
                agg, factors = pre[name][0], pre[name][1] + (f"Y{idx[0]}",)
            else:  # s_YY / s_rYY / s_r2YY
                r_part = {"s_YY": (), "s_rYY": ("r",), "s_r2YY": ("r", "r")}[name]
                agg, factors = "sum", r_part + (f"Y{idx[0]}", f"Y{idx[1]}")
        out.append((alias, agg, factors))
    return out
