"""Integer codes of a frame's columns, so that the group-bys of checks a (over object columns: policy ids, feature
names, values, ad ids, days) are numpy work on int64 arrays: a column is hashed once (``pd.factorize``) and every
group-by of it after that is a bincount.

    Codes(frame)(col, sort)    codes 0..k-1 of a column (first seen, or sorted values), -1 for a null (memo)
    dense(codes, sizes)        one code per tuple of codes, 0..k-1 in the tuples' lexicographic (sorted) order
    first_seen(codes, sizes)   one code per tuple, 0..k-1 in the order the tuples first appear (groupby sort=False)
    spread(code, k, x)         per code: the x of its rows (x takes one value per code)
    keep_rows(mask, arrays)    the arrays at the rows of a mask (no copy when it keeps them all)
    group_sum(code, x, k)      per code: sum x (exact integer sums; pandas' compensated sum for floats)

Group-by semantics kept: a null in a key drops the row (the caller masks codes < 0), sorted groups come in the
order of ``groupby(sort=True)``, first-seen ones in that of ``groupby(sort=False)``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

_SPAN_MAX = 2 ** 62          # mixed-radix keys stay below this (int64), else they are compressed first


class Codes:
    """Memoised ``pd.factorize`` per column of one frame: (codes, uniques), codes -1 for None/NaN/NaT (the values
    ``isna`` and ``groupby(dropna=True)`` treat as null); in first-seen order, or with ``sort`` in the order of the
    sorted values (that of ``pd.factorize(sort=True)`` and ``groupby(sort=True)``: only the uniques are sorted)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame, self._memo = frame, {}

    def __call__(self, col: str, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
        if (col, sort) not in self._memo:
            if sort:
                codes, uniques = self(col)
                rank, uniques = pd.factorize(uniques, sort=True)        # rank of each first-seen value
                codes = np.append(rank.astype(np.int64), -1)[codes]      # a null (-1) stays -1
            else:
                codes, uniques = pd.factorize(self.frame[col])
            self._memo[(col, sort)] = (codes.astype(np.int64, copy=False), uniques)
        return self._memo[(col, sort)]

    def size(self, col: str) -> int:
        """Distinct non-null values of ``col`` (``nunique()``)."""
        return len(self(col)[1])


def _mixed(codes: list, sizes: list) -> tuple[np.ndarray, int]:
    """key = sum_i c_i prod_{j > i} size_j (lexicographic order of the tuples) and its span; compressed (sorted,
    dense) whenever the span would pass 2**62."""
    key, span = np.zeros(len(codes[0]), dtype=np.int64), 1
    for c, s in zip(codes, sizes):
        s = max(int(s), 1)
        if span * s > _SPAN_MAX:
            key, span = _compress(key, span)
        key, span = key * s + c, span * s
    return key, span


def _compress(key: np.ndarray, span: int) -> tuple[np.ndarray, int]:
    """Dense codes 0..k-1 of ``key`` (values in [0, span)) keeping its order, and k."""
    if span <= 4 * len(key) + (1 << 16):
        present = np.bincount(key, minlength=span) > 0
        return (np.cumsum(present) - 1)[key], int(present.sum())
    codes, uniques = pd.factorize(key, sort=True)
    return codes.astype(np.int64, copy=False), len(uniques)


def dense(codes: list, sizes: list) -> tuple[np.ndarray, int]:
    """Codes 0..k-1 of the tuples (codes[0][i], codes[1][i], ...), sorted as the tuples (each codes[j] in
    [0, sizes[j])), and k."""
    return _compress(*_mixed(codes, sizes))


def first_seen(codes: list, sizes: list) -> tuple[np.ndarray, int]:
    """Codes 0..k-1 of the tuples in the order they first appear, and k."""
    found, uniques = pd.factorize(_mixed(codes, sizes)[0])
    return found.astype(np.int64, copy=False), len(uniques)


def keep_rows(mask: np.ndarray, arrays: list) -> list:
    """The arrays at the rows of ``mask``; no copy when it keeps every row."""
    return list(arrays) if mask.all() else [a[mask] for a in arrays]


def spread(code: np.ndarray, k: int, x: np.ndarray) -> np.ndarray:
    """out[code[i]] = x[i]: per code the x of its rows, where x is constant on each code (a group's key codes)."""
    out = np.zeros(k, dtype=x.dtype)
    out[code] = x
    return out


def group_sum(code: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """sum_{i: code[i] = g} x[i] for g = 0..k-1, as float. Integers: np.bincount, exact while the sums stay below
    2**53 (as pandas' integer sum then cast to float); else pandas' group sum (Kahan, in row order) as a
    ``groupby(...).sum()`` gives."""
    if x.dtype.kind in "iub" and (not len(x) or float(np.abs(x.astype(float)).sum()) < 2.0 ** 52):
        return np.bincount(code, weights=x.astype(float), minlength=k).astype(float, copy=False)
    sums = pd.Series(x).groupby(code, sort=True).sum()
    return sums.reindex(range(k), fill_value=0).to_numpy(float)
