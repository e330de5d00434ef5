"""Keys and merge rules of the statistics tables (pure pandas/numpy).

Every value column is additive (a count or a sum), or a max; array columns add (or max) elementwise. A window's
statistics are ``merge`` of its days: group by the table's keys without ``dt`` and add.
Exactness: counts and sums of integer-valued terms (0/1 clicks) are exact in float64 up to 2^53, so merged days
equal a single scan bit for bit; sums of non-integer terms (importance weights) equal it up to the rounding of the
summation order (Spark does not fix the order in which partial aggregates are combined, even for one scan).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

# table -> (keys without dt, max columns); every other non-key column is summed.
TABLES: dict[str, tuple[list[str], list[str]]] = {
    "log_summary": (["logging_policy"], ["k_max", "r_max", "r_min"]),
    "ad_position": (["logging_policy", "ad_id", "position"], []),
    "slate_actions": (["slate_key"], []),
    "slate_targets": (["policy_id", "slate_key"], []),
    "base_targets": (["policy_id", "base_policy"], []),
    "policy_events": (["policy_id"], []),
    "factored": (["policy_id", "ad_id", "pos_i", "pos_j"], []),
    "factored_sq": (["policy_id", "ad_id", "pos_i", "pos_j", "pos_j2"], []),
    "target_placements": (["policy_id", "ad_id", "pos_j"], []),
    "slate_moments": (["policy_id", "logging_policy"], ["max_W", "max_Y"]),
}

# YY-type arrays are K*K (row-major); the others are length K (slate moments) or B (bootstrap).
SQUARE_ARRAYS = {"s_YY", "s_rYY", "s_r2YY"}


def _pad(arr, K: int, square: bool) -> np.ndarray:
    arr = np.asarray(arr, dtype=float)
    if square:
        k0 = int(round(np.sqrt(arr.size)))
        if k0 == K:
            return arr
        out = np.zeros((K, K))
        out[:k0, :k0] = arr.reshape(k0, k0)
        return out.ravel()
    if arr.size == K:
        return arr
    out = np.zeros(K)
    out[:arr.size] = arr
    return out


def merge(name: str, frames: list[pd.DataFrame], by_dt: bool = False) -> pd.DataFrame:
    """Sum the per-day frames of table ``name`` over dt (or keep dt with ``by_dt``); arrays add elementwise.

    Slate-moment arrays of days with a different K are zero-padded to the largest K (a missing position has
    no events, so all its sums are 0).
    """
    keys, max_cols = TABLES[name]
    if by_dt:
        keys = ["dt", *keys]
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=keys)
    df = pd.concat(frames, ignore_index=True)
    values = [c for c in df.columns if c not in keys and c != "dt"]
    array_cols = [c for c in values if df[c].dtype == object and isinstance(df[c].iloc[0], (list, np.ndarray))]
    scalar_cols = [c for c in values if c not in array_cols]
    agg = {c: (("min" if c.endswith("_min") else "max") if c in max_cols else "sum") for c in scalar_cols}
    wide_parts = [df[keys + scalar_cols]]
    wide_agg = dict(agg)
    layout = {}
    for c in array_cols:
        if name == "slate_moments":
            sq = c in SQUARE_ARRAYS
            kk = max(int(round(np.sqrt(np.asarray(v).size))) if sq else np.asarray(v).size for v in df[c])
            mat = np.vstack([_pad(v, kk, sq) for v in df[c]])
        else:
            mat = np.vstack([np.asarray(v, dtype=float) for v in df[c]])
        names = [f"__{c}__{i}" for i in range(mat.shape[1])]
        layout[c] = names
        wide_parts.append(pd.DataFrame(mat, columns=names, index=df.index))
        for n in names:
            wide_agg[n] = "max" if c in max_cols else "sum"
    wide = pd.concat(wide_parts, axis=1)
    # fill nulls (a sum over no rows is null in Spark) before adding; max columns keep NaN semantics of max
    sum_cols = [c for c, how in wide_agg.items() if how == "sum"]
    wide[sum_cols] = wide[sum_cols].fillna(0)
    out = wide.groupby(keys, dropna=False, sort=True).agg(wide_agg).reset_index()
    for c, names in layout.items():
        mat = out[names].to_numpy(dtype=float)
        out[c] = list(mat)
        out = out.drop(columns=names)
    return out[keys + values]


def merge_all(per_table: dict[str, list[pd.DataFrame]], by_dt: bool = False) -> dict[str, pd.DataFrame]:
    return {name: merge(name, frames, by_dt=by_dt) for name, frames in per_table.items() if name in TABLES}


def split_by_dt(tables: dict[str, pd.DataFrame]) -> dict:
    """{table: frame with dt} -> {dt: {table: frame}} (each day's rows, dt kept)."""
    days: dict = {}
    for name, df in tables.items():
        if df is None or not len(df):
            continue
        for dt, part in df.groupby("dt", sort=True):
            days.setdefault(dt, {})[name] = part.reset_index(drop=True)
    return days
