"""The merge of the statistics tables over days by their declared keys and rules (statistics/declarations.py), and
the driver-side splits of the statements that make several tables (pure pandas/numpy).

Every value column is additive (a count or a sum) or a max/min. A window's statistics are ``merge`` of its days:
group by the table's keys without ``dt`` and add; tables whose test pools within days (check d's strata, the
per-day counts) keep ``dt`` as a key. Exactness: counts and sums of 0/1 clicks are exact in float64 up to 2^53,
so merged days equal a single scan bit for bit; sums of importance weights equal it up to summation order.

Slate moments of days with different K are padded as Y_k = 1 for the positions a day never held (the convention of
``statistics/sql/decisions.py``): W and G = 1 - K + sum_k Y_k do not change, so neither does any estimate.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from .fast_merge import grouped, key_codes
from .moment_columns import add_extra_moments, moments_k


# The declared statistics tables by name (statistics/declarations.Table: keys, merge rules, ...), filled by
# statistics/declarations.py, which the package imports before any of its modules is used
TABLES: dict = {}


def small_tables() -> tuple:
    """The declared tables reduced in pandas (not big), in declaration order."""
    return tuple(n for n, t in TABLES.items() if not t.big)


def big_columns() -> dict:
    """{big table: its stored columns}."""
    return {n: t.columns for n, t in TABLES.items() if t.big}


def _is_max(name: str, col: str) -> bool:
    """Whether table ``name`` merges column ``col`` as a max or a min (its declared rule), not as a sum."""
    return TABLES[name].rule(col) in ("max", "min")


def merge(name: str, frames: list, by_dt: bool = False) -> pd.DataFrame:
    """Sum the per-day frames of table ``name`` over dt (keep dt with ``by_dt`` or for per-day tables); a column
    its declaration merges otherwise (declarations.Table.merge: max, min, a function) so; nulls of sums (a sum over
    no rows) count 0."""
    t = TABLES[name]
    keys = list(t.keys)
    if by_dt or t.per_day:
        keys = ["dt", *keys]
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=keys)
    if t.align is not None:
        frames = t.align(frames, by_dt)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
    values = [c for c in df.columns if c not in keys and c != "dt"]
    dtypes = dict(zip(df.columns, df.dtypes))          # one lookup, not a column made per value column
    agg = {}
    for c in values:
        how = t.rule(c)
        if how is not None:
            agg[c] = how
        elif dtypes[c] == object and len(df) and isinstance(df[c].dropna().iloc[0] if df[c].notna().any()
                                                            else None, (list, np.ndarray)):
            agg[c] = _sum_arrays
        else:
            agg[c] = "sum"
    sums = [c for c, how in agg.items() if how == "sum"]
    if t.per_day and _in_day_order(frames):
        # days kept apart (dt a key), each frame's days after the one before's: its rows, already one per key and
        # in order when each day's are (window._split sorts a pass's days), side by side with no sort
        return _zero_filled(df, sums)[keys + values]
    if keys and len(frames) == 1 and (one := _one_row_per_key(df, keys)) is not None:
        # one day's rows, one per key (as a pass makes them): in the keys' order
        return _zero_filled(df.take(one), sums).reset_index(drop=True)[keys + values]
    if keys and ((len(frames) == 1 and not df.duplicated(keys).any()) or (keys[0] == "dt" and _apart(frames))):
        # one day's rows, or days kept apart (dt a key) that no two frames share: already one row per key
        df = _zero_filled(df, sums)
        return df.sort_values(keys, kind="stable").reset_index(drop=True)[keys + values]
    if not keys:
        df = _zero_filled(df, sums)
        return pd.DataFrame([{c: _reduce(df[c], how) for c, how in agg.items()}])[values]
    fast = grouped(df, keys, agg)        # numpy: the usual table (statistics/fast_merge.py)
    if fast is not None:
        return fast
    # one vectorized reduction per kind, not one per column: slate moments of K positions hold ~1.5 K^2 columns
    text = [c for c, how in agg.items() if how in ("min", "max")]
    g = ordered_text(df, text).groupby(keys, dropna=False, sort=True, observed=True)
    parts = [g[sums].sum()] if sums else []            # a sum over no values (nulls only) is 0
    for how in ("min", "max"):
        cols = [c for c, h in agg.items() if h == how]
        if cols:
            parts.append(getattr(g[cols], how)())
    other = {c: how for c, how in agg.items() if callable(how)}
    if other:
        parts.append(g.agg(other))
    out = pd.concat(parts, axis=1).reset_index() if parts else g.size().reset_index()[keys]
    return plain_text(out, text)[keys + values]


def _one_row_per_key(df: pd.DataFrame, keys: list):
    """The row order that sorts ``df`` by ``keys`` when no two rows share them (statistics/fast_merge.key_codes);
    None when two do, or the keys are not for numpy to order (pandas' test then)."""
    if len(df) < 2:
        return np.arange(len(df))
    code = key_codes(df, keys)
    if code is None:
        return None
    order = np.argsort(code, kind="stable")
    return order if (np.diff(code[order]) > 0).all() else None


def partial_against_window(frames: list) -> list:
    """policy_events frames with n_partial counted against the largest K they hold (k_held): a row of a day whose
    K is smaller holds fewer positions than the window's K, so every event of it is partial. A day's n_partial is
    counted against its own K (scan.held_positions_sql), so the window's count does not depend on batching."""
    held = [pd.to_numeric(f["k_held"], errors="coerce") for f in frames if "k_held" in f.columns]
    if len(held) != len(frames):
        return frames
    K = max(float(h.max()) for h in held)
    out = []
    for f, h in zip(frames, held):
        short = (h < K).to_numpy()
        if short.any():
            f = f.assign(n_partial=np.where(short, f["n_events"].to_numpy(), f["n_partial"].to_numpy()), k_held=K)
        out.append(f)
    return out


def _apart(frames: list) -> bool:
    """No day is in two of ``frames``, each a day's or a merge's rows (one per key): the window's rows of a table
    that keeps dt as a key are then the frames' rows side by side (a 31-day window of check a's cells was grouped
    again, 185,000 rows, in each of its two merges)."""
    if len(frames) < 2 or any("dt" not in f.columns for f in frames):
        return False
    days = [pd.unique(f["dt"]) for f in frames]
    return len(pd.unique(np.concatenate(days))) == sum(len(d) for d in days)


def _in_day_order(frames: list) -> bool:
    """Two frames or more, each holding one day or several, every day of a frame after every day of the frame
    before it (the stored days, then the day scanned now): side by side they hold each day once, in day order."""
    if len(frames) < 2 or any("dt" not in f.columns or f["dt"].isna().any() for f in frames):
        return False
    try:
        bounds = [(f["dt"].min(), f["dt"].max()) for f in frames]
        return all(hi < lo for (_, hi), (lo, _) in zip(bounds, bounds[1:]))
    except TypeError:           # days of types that do not compare (dates beside timestamps): the sorting merge
        return False


def sorted_day(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """A pass's rows of a table that keeps dt as a key, sorted by dt and its keys (a day's rows in the engine's
    order vary from run to run): merged with other days' frames side by side (:func:`merge`), they stay in order."""
    t = TABLES.get(name)
    if t is None or not t.per_day or not len(df) or "dt" not in df.columns:
        return df
    return df.sort_values(["dt", *t.keys], kind="stable").reset_index(drop=True)


def _zero_filled(df: pd.DataFrame, cols: list) -> pd.DataFrame:
    """``df`` with nulls of ``cols`` as 0, block-wise (assigning thousands of columns one by one is slow); only
    the columns that hold a null."""
    if cols:
        held = df[cols].isna().to_numpy().any(axis=0)      # one block-wise test, not a column made per column
        cols = [c for c, h in zip(cols, held) if h]
    if not cols:
        return df
    return pd.concat([df.drop(columns=cols), df[cols].fillna(0)], axis=1)


def ordered_text(df: pd.DataFrame, cols) -> pd.DataFrame:
    """``df`` with its text columns among ``cols`` as ordered categoricals (min/max by string order), so that a
    group-by takes their min/max in compiled code: pandas reduces object columns one Python call per group."""
    conv = {}
    for c in cols:
        if c in df.columns and df[c].dtype == object:
            vals = df[c].dropna().unique()
            if all(isinstance(v, str) for v in vals):
                conv[c] = pd.Categorical(df[c], categories=sorted(vals), ordered=True)
    return df.assign(**conv) if conv else df


def plain_text(df: pd.DataFrame, cols) -> pd.DataFrame:
    """The categoricals of :func:`ordered_text` back as object columns (None where a group had no value)."""
    conv = {c: df[c].astype(object).where(df[c].notna(), None) for c in cols
            if c in df.columns and isinstance(df[c].dtype, pd.CategoricalDtype)}
    return df.assign(**conv) if conv else df


def _reduce(s: pd.Series, how):
    if callable(how):
        return how(s)
    return getattr(s, how)()


def _sum_arrays(s: pd.Series):
    arrays = [np.asarray(v, dtype=float) for v in s if v is not None]
    return np.sum(arrays, axis=0) if arrays else None


def merge_all(per_day: dict, dates: list, by_dt: bool = False) -> dict:
    """{table: merged frame} over ``dates`` of ``per_day`` ({dt: {table: frame}})."""
    return merge_tables({name: [per_day.get(d, {}).get(name) for d in dates] for name in small_tables()}, by_dt)


def merge_tables(frames: dict, by_dt: bool = False, stored: bool = False) -> dict:
    """{table: merged frame} of {table: [frames with dt]} (a day's frame each, or several days' at once).
    ``stored``: the frames are stored days' tables as written (one row per key and day): a table that keeps dt as
    a key is only put side by side, and the window's merge puts the days scanned now beside it (a 31-day window's
    check-a cells, 180,000 rows, were checked for repeated keys and sorted in both merges)."""
    out = {}
    for name in small_tables():
        parts = [f for f in frames.get(name) or [] if f is not None and len(f)]
        if stored and TABLES[name].per_day and not by_dt:
            merged = pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else [])
        else:
            merged = merge(name, parts, by_dt=by_dt)
        if len(merged):
            out[name] = merged
    return out


def split_by_dt(tables: dict) -> dict:
    """{table: frame with dt} -> {dt: {table: frame}} (each day's rows, dt kept)."""
    days: dict = {}
    for name, df in tables.items():
        if df is None or not len(df):
            continue
        for dt, part in df.groupby("dt", sort=True):
            days.setdefault(dt, {})[name] = part.reset_index(drop=True)
    return days


# ---- unpivots done on the driver (small aggregated rows) --------------------------------------------------------
def split_policy_groups(g: pd.DataFrame, extras: pd.DataFrame | None = None, K: int | None = None,
                        day_k: dict | None = None) -> dict:
    """policy_events, base_targets and slate_moments from the per-(dt, policy, logging, base, fold) rows; with
    ``extras`` (the long sums of positions beyond the wide ones) the slate moments of all K positions. ``day_k``
    ({'YYYY-MM-DD': the day's K}) gives policy_events' k_held, the K each day's n_partial counts against."""
    out = {}
    keys = ["dt", "policy_id"]
    has_base = g["base_policy"].notna()
    pe = g.assign(n_with_base=g["n_all"].where(has_base, 0)).groupby(keys, sort=True).agg(
        n_events=("n_all", "sum"), n_deterministic=("n_det", "sum"), n_with_base=("n_with_base", "sum"),
        n_reorder=("n_reorder", "sum"), n_short=("n_short", "sum"), n_partial=("n_partial", "sum"),
        n_missing_propensity=("n_missing_propensity", "sum")).reset_index()
    if day_k is not None:
        days = pd.Series([pd.Timestamp(d).date().isoformat() if pd.notna(d) else None for d in pe["dt"]])
        pe["k_held"] = days.map(day_k).fillna(K or 0).astype("int64").to_numpy()
    out["policy_events"] = pe.astype({c: "int64" for c in pe.columns if c.startswith("n_")})
    b = g[has_base]
    match = (b["base_policy"] == b["logging_policy"]).to_numpy()
    zero = np.zeros(len(b), dtype="int64")
    bt = pd.DataFrame({"dt": b["dt"].to_numpy(), "policy_id": b["policy_id"].to_numpy(),
                       "base_policy": b["base_policy"].to_numpy(), "n_target": b["n_all"].to_numpy(),
                       "n_match": b["n_all"].to_numpy() * match,
                       "s_r": b["s_r_all"].fillna(0).to_numpy() * match,
                       "s_r2": b["s_r2_all"].fillna(0).to_numpy() * match, "t": zero})
    # t = T_a: the policy's decided events (with a base) that logging policy a served, keyed like the target's
    # base, so that a target whose decisions cover part of the log is not scaled down by that share
    served = pd.DataFrame({"dt": b["dt"].to_numpy(), "policy_id": b["policy_id"].to_numpy(),
                           "base_policy": b["logging_policy"].to_numpy(), "n_target": zero, "n_match": zero,
                           "s_r": np.zeros(len(b)), "s_r2": np.zeros(len(b)), "t": b["n_all"].to_numpy()})
    bt = pd.concat([bt, served], ignore_index=True)
    out["base_targets"] = (bt.groupby(["dt", "policy_id", "base_policy"], sort=True).sum().reset_index()
                           .astype({"n_target": "int64", "n_match": "int64", "t": "int64"}))
    moment_cols = [c for c in g.columns if c == "n" or c == "n_missing_propensity" or c.startswith(("s_", "max_"))
                   or c.startswith("n_W") or c.startswith("n_Y")]
    moment_cols = [c for c in moment_cols if c not in ("s_r_all", "s_r2_all")]
    sm = g[["dt", "policy_id", "logging_policy", "fold", *moment_cols]]
    out["slate_moments"] = merge("slate_moments", [sm], by_dt=True)
    Kw = moments_k(out["slate_moments"])
    if extras is not None and K is not None and K > Kw and len(out["slate_moments"]):
        out["slate_moments"] = add_extra_moments(out["slate_moments"], extras, K, Kw)
    return out


def split_factored(long: pd.DataFrame) -> dict:
    """The ``factored`` (.., pos_j, s_rp, s_r2p) and ``factored_sq`` (.., pos_j, pos_j2, s_r2pp) tables from the
    long per-(dt, policy, ad, pos_i, pos_j, pos_j2) sums of ``statistics/sql/decision_tables.factored``
    (pos_j2 = 0: the single sums); a row exists where some rewarded slot's ad has target probability > 0 at j."""
    keys = ["dt", "policy_id", "ad_id", "pos_i"]
    fac_cols, sq_cols = keys + ["pos_j", "s_rp", "s_r2p"], keys + ["pos_j", "pos_j2", "s_r2pp"]
    if not len(long):
        return {"factored": pd.DataFrame(columns=fac_cols), "factored_sq": pd.DataFrame(columns=sq_cols)}
    long = long.astype({"pos_j": "int32", "pos_j2": "int32"})
    single = long["pos_j2"] == 0
    fac = long[single].rename(columns={"s_1": "s_rp", "s_2": "s_r2p"})[fac_cols]
    sq = long[~single].rename(columns={"s_2": "s_r2pp"})[sq_cols]
    return {"factored": fac.sort_values(fac_cols[:5], kind="stable").reset_index(drop=True),
            "factored_sq": sq.sort_values(sq_cols[:6], kind="stable").reset_index(drop=True)}
