"""Slate-moment columns of K positions (statistics/sql/decisions.py's ``s_Y_k``, ``s_YY_j_k``, ...): their K, and
moments of fewer positions as moments of more, with Y_k = 1 at a position an event does not hold (W and
G = 1 - K + sum_k Y_k do not change, so neither does any estimate), or of more as moments of fewer."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd


def moments_k(df: pd.DataFrame) -> int:
    """K of a slate-moments frame: its number of s_Y_k columns."""
    return sum(1 for c in df.columns if re.fullmatch(r"s_Y_\d+", c))


def pad_moments(df: pd.DataFrame, K: int) -> pd.DataFrame:
    """Slate moments of K0 <= K positions as moments of K positions with Y_k = 1 for k > K0 (see module doc): the
    positions beyond K0 as extra positions that no event holds (D_k = 0, :func:`add_extra_moments`)."""
    K0 = moments_k(df)
    if K0 >= K:
        return df
    return extend_moments(df.reset_index(drop=True), {}, K, K0)


def align_moments(frames: list, by_dt: bool = False) -> list:
    """Slate-moment frames of days with different K as moments of the largest (:func:`pad_moments`)."""
    K = max(moments_k(f) for f in frames)
    return [pad_moments(f, K) for f in frames]


_MOMENT_POSITIONS = re.compile(r"(?:s_(?:r2?)?Y|n_Y_pos|max_Y)_(\d+)|s_(?:r2?)?YY_(\d+)_(\d+)")   # columns of positions


def fit_moments(df: pd.DataFrame, K: int) -> pd.DataFrame:
    """Slate moments as moments of exactly K positions: padded (:func:`pad_moments`), or without the positions beyond
    K when it holds more (a day scanned in a batch of a larger K, whose rows hold none of them: Y_k = 1 there, so the
    moments of positions 1..K are those of one scan of that day alone)."""
    if moments_k(df) <= K:
        return pad_moments(df, K)
    beyond = [c for c in df.columns
              if (m := _MOMENT_POSITIONS.fullmatch(c)) and max(int(g) for g in m.groups() if g) > K]
    return df.drop(columns=beyond)


def add_extra_moments(sm: pd.DataFrame, extras: pd.DataFrame, K: int, Kw: int) -> pd.DataFrame:
    """Slate moments of positions Kw+1..K from the long sums of ``decision_tables.policy_extras`` (per dt, policy,
    logging policy, fold; j = 0: sums of D_k = Y_k - 1 over the events holding k, j >= 1: sums of D_j D_k); see
    :func:`extend_moments` for the identities."""
    keys = ["dt", "policy_id", "logging_policy", "fold"]
    out = sm.copy().reset_index(drop=True)
    rows = len(out)
    sums: dict = {}          # (j, k, column) -> per-row array, built in one pass over the long rows
    if len(extras):
        at = pd.Series(np.arange(rows), index=pd.MultiIndex.from_frame(out[keys]))
        where = at.reindex(pd.MultiIndex.from_frame(extras[keys])).to_numpy()
        ok = ~np.isnan(where.astype(float))
        ex = extras[ok].assign(_row=where[ok].astype(int))
        for (j, k), g in ex.groupby(["j", "k"], sort=False):
            idx = g["_row"].to_numpy()
            for col in ("n", "s_v", "s_rv", "s_r2v", "n_pos"):
                arr = np.zeros(rows)
                np.add.at(arr, idx, g[col].fillna(0).to_numpy(float))
                sums[(int(j), int(k), col)] = arr
            top = np.full(rows, -np.inf)
            np.maximum.at(top, idx, g["max_y"].fillna(-np.inf).to_numpy(float))
            sums[(int(j), int(k), "max_y")] = top
    from ..estimators.slate_moments import flat_columns

    return extend_moments(out, sums, K, Kw)[keys + flat_columns(K)]


def extend_moments(out: pd.DataFrame, sums: dict, K: int, Kw: int) -> pd.DataFrame:
    """``out`` (moments of positions 1..Kw) with the moments of positions Kw+1..K added, from ``sums``: per-row
    arrays keyed (0, k, col) for position k's sums of D_k over the n_k events holding it, (j, k, col) for the
    sums of D_j D_k; a key not there is 0 (no event holds the position). Since Y_k = 1 + D_k and
    Y_j Y_k = Y_j + D_k + D_j D_k (D = 0 where an event does not hold the position):
      s_Y_k = n + S_D_k, n_Y_pos_k = n - n_k + n_pos_k, max_Y_k = max(max_y_k, 1 if an event does not hold k),
      s_YY_j_k = S_Y_j + S_D_k + S_DD_jk (likewise with r and r^2)."""
    rows = len(out)
    n, sr, sr2 = (out[c].fillna(0).to_numpy(float) for c in ("n", "s_r", "s_r2"))
    base = {"": n, "r": sr, "r2": sr2}
    cols = {"": "s_v", "r": "s_rv", "r2": "s_r2v"}
    zeros = np.zeros(rows)

    def get(j, k, col):
        return sums.get((j, k, col), zeros)

    new = {}

    def y_sum(j, w):      # S_Y_j (w = "", "r", "r2") of a wide position or of one added before
        name = f"s_{w}Y_{j}"
        return new[name] if j > Kw else out[name].fillna(0).to_numpy(float)

    for k in range(Kw + 1, K + 1):
        for w in ("", "r", "r2"):
            new[f"s_{w}Y_{k}"] = base[w] + get(0, k, cols[w])
        held, pos = get(0, k, "n"), get(0, k, "n_pos")
        top = sums.get((0, k, "max_y"), np.full(rows, -np.inf))
        new[f"n_Y_pos_{k}"] = n - held + pos
        some = held > 0
        new[f"max_Y_{k}"] = np.where(n > held, np.where(some, np.maximum(top, 1.0), 1.0),
                                     np.where(some, top, np.nan))
        for j in range(1, k + 1):
            for w in ("", "r", "r2"):
                new[f"s_{w}YY_{j}_{k}"] = y_sum(j, w) + get(0, k, cols[w]) + get(j, k, cols[w])
    return pd.concat([out, pd.DataFrame(new, index=out.index)], axis=1)
