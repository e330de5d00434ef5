"""The ranking family's additive sums (MATH.md-style notes in :mod:`.ranking`): what one pass keeps per
(dt, policy_id, logging_policy, fold), declared once here for the SQL (statistics/sql/ranking_tables.py) and for the
numpy reference (:func:`sums_from_events`), and laid out long, one row per (k, l), so that days and slates of any
length merge by summing.

Per event i and position k (the row's own slots; 1 <= k <= K):

    y_k   = pi_k(a_k|x) / mu_k(a_k|x)       at a held slot with a propensity (else undefined)
    v_k   = y_k where defined, else 1          (IIPS' design variable: E_mu[v_k] = 1 on every event)
    V_k   = prod_{j<=k} v_j                    (RIPS' design variable, the prefix weight: E_mu[V_k] = 1)
    u_k   = 1 if k is held, has a propensity and a known slot reward r_k (IIPS' term at k is usable)
    g_k   = 1 if positions 1..k are all held with a propensity and r_k is known (RIPS' term at k is usable)
    A^I_k = u_k y_k r_k,  B^I_k = u_k y_k,  A^R_k = g_k V_k r_k,  B^R_k = g_k V_k
    T^I   = sum_k A^I_k,  T^R = sum_k A^R_k      (the per-event terms of IIPS and RIPS)

A slot without a propensity or with an unknown reward gives no term; a missing propensity at j breaks the prefix,
so the event gives no RIPS term at k >= j (counted: n_missing_propensity, n_no_prefix, n_broken_prefix).

Rows of the long table (columns unused by a row's kind are 0):

    k = 0, l = 0     n, n_missing_propensity, n_no_prefix, n_broken_prefix, n_beyond, s_ti, s_ti2, s_tr, s_tr2
    k >= 1, l = 0    n_ui, s_ai, s_bi, s_vi, s_vvi, s_vai: sums of u_k, A^I_k, B^I_k, v_k, v_k^2, v_k A^I_k; the same
                     of the prefix family (n_ur, s_ar, s_br, s_vr, s_vvr, s_var: g_k, A^R_k, B^R_k, V_k, V_k^2,
                     V_k A^R_k) and s_vpr = sum V_{k-1} V_k (V_0 = 1)
    1 <= k <= l      s_aa*, s_ab*, s_ba*, s_bb* (* = i, r): sums of A_k A_l, A_k B_l, B_k A_l, B_k B_l, for
                     k <= l <= CROSS_CAP, and k = l beyond it

The intervals need only the per-position sums (one empirical likelihood per position, estimators/ranking.py); the
pairs serve the self-normalized forms' delta-method standard error. Why capped: 8 sums per pair of positions, so a
slate of 64 wide positions would make 8 x 2,080 columns on top of the slate moments' 6,240; with pairs up to
CROSS_CAP = 8 the statement has at most 8 x 36 pair columns plus 13 per position. Beyond the cap the delta method
bounds the covariance of a position's term with the others by Cauchy-Schwarz (wider, still valid).

Cascade-DR's table (k = 0: n, s_d, s_d2; k >= 1: s_dk, s_d2k, s_vd, s_vpd = sums of d_k, d_k^2, V_k d_k,
V_{k-1} d_k) holds its per-event term D = sum_k d_k (+ the extra slots' T^R) and its per-position parts
d_k = A^R_k + g'_k (V_{k-1} sum_a pi_k(a|x) q_k(a) - V_k q_k(a_k)), g'_k = positions 1..k held with a propensity.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CROSS_CAP = 8
PSEUDO_EVENTS = 20.0      # Cascade-DR's model: pseudo-events of shrinkage toward the position's mean (ranking.py)
KEYS = ("policy_id", "logging_policy", "fold")
SCALARS = ("n", "n_missing_propensity", "n_no_prefix", "n_broken_prefix", "n_beyond", "s_ti", "s_ti2", "s_tr",
           "s_tr2")
PER_POSITION = ("n_ui", "s_ai", "s_bi", "s_vi", "s_vvi", "s_vai", "n_ur", "s_ar", "s_br", "s_vr", "s_vvr", "s_var",
                "s_vpr")
PAIRS = ("s_aai", "s_abi", "s_bai", "s_bbi", "s_aar", "s_abr", "s_bar", "s_bbr")
COLUMNS = SCALARS + PER_POSITION + PAIRS
DR_SCALARS = ("n", "s_d", "s_d2")                       # Cascade-DR (k = 0): events, sums of D and D^2
DR_PER_POSITION = ("s_dk", "s_d2k", "s_vd", "s_vpd")     # k >= 1: sums of d_k, d_k^2, V_k d_k, V_{k-1} d_k


def pairs(K: int, cap: int = CROSS_CAP) -> list[tuple[int, int]]:
    """(k, l) of the pair sums for K positions: k <= l <= cap, then (k, k) beyond the cap."""
    m = min(K, cap)
    return [(k, l) for k in range(1, m + 1) for l in range(k, m + 1)] + [(k, k) for k in range(m + 1, K + 1)]


def _symbol_terms(K: int) -> list[tuple[str, int, int, tuple]]:
    """(column, k, l, factors): every sum of the long table as a product of per-event symbols (AI3, BR2, VI1, UR4,
    VP2 = V_1, TI, TR, ...); n and the counts are handled by the SQL and the reference themselves."""
    out = [("s_ti", 0, 0, ("TI",)), ("s_ti2", 0, 0, ("TI", "TI")), ("s_tr", 0, 0, ("TR",)),
           ("s_tr2", 0, 0, ("TR", "TR"))]
    for k in range(1, K + 1):
        for f in ("I", "R"):
            c, a, v = f.lower(), f"A{f}{k}", f"V{f}{k}"
            out += [(f"n_u{c}", k, 0, (f"U{f}{k}",)), (f"s_a{c}", k, 0, (a,)), (f"s_b{c}", k, 0, (f"B{f}{k}",)),
                    (f"s_v{c}", k, 0, (v,)), (f"s_vv{c}", k, 0, (v, v)), (f"s_va{c}", k, 0, (v, a))]
        out.append(("s_vpr", k, 0, (f"VP{k}", f"VR{k}")))
    for k, l in pairs(K):
        for f in ("I", "R"):
            c = f.lower()
            out += [(f"s_aa{c}", k, l, (f"A{f}{k}", f"A{f}{l}")), (f"s_ab{c}", k, l, (f"A{f}{k}", f"B{f}{l}")),
                    (f"s_ba{c}", k, l, (f"B{f}{k}", f"A{f}{l}")), (f"s_bb{c}", k, l, (f"B{f}{k}", f"B{f}{l}"))]
    return out


def wide_name(column: str, k: int, l: int) -> str:
    """The statement's alias of a long-table sum: s_ti, n_ui_3, s_abr_1_2."""
    return column if k == 0 else f"{column}_{k}" if l == 0 else f"{column}_{k}_{l}"


def sum_terms(K: int) -> list[tuple[str, str, int, int, tuple]]:
    """(alias, column, k, l, factors) of every product sum, in the statement's column order."""
    return [(wide_name(c, k, l), c, k, l, f) for c, k, l, f in _symbol_terms(K)]


# ---- the numpy reference: per-event symbols and their sums ---------------------------------------------------------
def event_symbols(held, mu, pi, r) -> dict:
    """Per-event symbols of the module docstring from (n, K) arrays: ``held`` bool, ``mu`` the logged propensity (NaN:
    missing), ``pi`` = pi_k(a_k|x) of the logged ad, ``r`` the slot reward (NaN: unknown)."""
    held = np.asarray(held, bool)
    mu, pi, r = (np.asarray(a, float) for a in (mu, pi, r))
    prop = held & np.isfinite(mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(prop, pi / np.where(prop, mu, 1.0), np.nan)
    v = np.where(prop, y, 1.0)
    V = np.cumprod(v, axis=1)
    known = np.isfinite(r)
    u = prop & known
    g = np.cumprod(prop, axis=1).astype(bool) & known
    r0 = np.where(known, r, 0.0)
    s = {"AI": np.where(u, v * r0, 0.0), "BI": np.where(u, v, 0.0), "VI": v, "UI": u.astype(float),
         "AR": np.where(g, V * r0, 0.0), "BR": np.where(g, V, 0.0), "VR": V, "UR": g.astype(float)}
    s["VP"] = np.column_stack([np.ones(len(V)), V[:, :-1]])
    s["TI"], s["TR"] = s["AI"].sum(1), s["AR"].sum(1)
    first = prop[:, 0] if prop.shape[1] else np.zeros(len(prop), bool)
    prefix = np.cumprod(prop, axis=1).sum(1)                       # usable prefix length
    last = np.where(held.any(1), held.shape[1] - np.argmax(held[:, ::-1], axis=1), 0)
    s["counts"] = {"n_missing_propensity": int((held & ~np.isfinite(mu)).any(1).sum()),
                   "n_no_prefix": int((~first).sum()),
                   "n_broken_prefix": int((first & (prefix < last)).sum())}
    return s


def _symbol(s: dict, name: str) -> np.ndarray:
    if name in ("TI", "TR"):
        return s[name]
    return s[name[:2]][:, int(name[2:]) - 1]


def sums_from_events(held, mu, pi, r) -> pd.DataFrame:
    """The long table (k, l, COLUMNS) of one group of events (the numpy reference of the statement)."""
    s = event_symbols(held, mu, pi, r)
    K = np.asarray(held).shape[1]
    rows: dict = {}
    for _, column, k, l, factors in sum_terms(K):
        rows.setdefault((k, l), {})[column] = float(np.prod([_symbol(s, f) for f in factors], axis=0).sum())
    rows[(0, 0)].update(n=float(len(s["TI"])), n_beyond=0.0, **{c: float(v) for c, v in s["counts"].items()})
    out = pd.DataFrame([{"k": k, "l": l, **vals} for (k, l), vals in rows.items()])
    return out.reindex(columns=["k", "l", *COLUMNS]).fillna(0.0)


def dr_sums_from_events(held, mu, pi, r, q_logged, e_pi) -> pd.DataFrame:
    """The Cascade-DR long table (k, DR columns) of one group (module docstring): ``q_logged`` = q_k(a_k), ``e_pi`` =
    sum_a pi_k(a|x) q_k(a) as (n, K) arrays."""
    s = event_symbols(held, mu, pi, r)
    held, mu = np.asarray(held, bool), np.asarray(mu, float)
    gp = np.cumprod(held & np.isfinite(mu), axis=1).astype(bool)
    V, Vp = s["VR"], s["VP"]
    d = s["AR"] + np.where(gp, Vp * np.nan_to_num(e_pi) - V * np.nan_to_num(q_logged), 0.0)
    D = d.sum(1)
    rows = [{"k": 0, "n": float(len(D)), "s_d": float(D.sum()), "s_d2": float((D * D).sum())}]
    rows += [{"k": k, "s_dk": float(d[:, k - 1].sum()), "s_d2k": float((d[:, k - 1] ** 2).sum()),
              "s_vd": float((V[:, k - 1] * d[:, k - 1]).sum()), "s_vpd": float((Vp[:, k - 1] * d[:, k - 1]).sum())}
             for k in range(1, V.shape[1] + 1)]
    return pd.DataFrame(rows).reindex(columns=["k", *DR_SCALARS, *DR_PER_POSITION]).fillna(0.0)


# ---- layout ------------------------------------------------------------------------------------------------------
def to_long(wide: pd.DataFrame, dr: bool = False) -> pd.DataFrame:
    """A statement's wide rows (keys + aliases) -> the long table (keys, k, l, columns), 0 for sums a row's kind
    does not use. ``dr``: the Cascade-DR statement (aliases n, s_d, s_d2, s_vd_k)."""
    keys = [c for c in ("dt", *KEYS) if c in wide.columns]
    cols = DR_SCALARS + DR_PER_POSITION if dr else COLUMNS
    parts = []
    for alias in wide.columns:
        if alias in keys:
            continue
        name, k, l = _parse(alias)
        parts.append(pd.DataFrame({**{c: wide[c].to_numpy() for c in keys}, "k": k, "l": l, "column": name,
                                   "value": pd.to_numeric(wide[alias], errors="coerce").fillna(0.0).to_numpy()}))
    if not parts:
        return pd.DataFrame(columns=[*keys, "k", "l", *cols])
    long = pd.concat(parts, ignore_index=True)
    out = long.pivot_table(index=[*keys, "k", "l"], columns="column", values="value", aggfunc="sum").reset_index()
    out = out.reindex(columns=[*keys, "k", "l", *cols]).fillna(0.0)
    out.columns.name = None          # the pivot's label, which a stored table would not keep
    return out.drop(columns="l") if dr else out


def _parse(alias: str) -> tuple[str, int, int]:
    parts = alias.split("_")
    nums = []
    while parts and parts[-1].isdigit():
        nums.insert(0, int(parts.pop()))
    return "_".join(parts), (nums + [0, 0])[0], (nums + [0, 0])[1]


def merged(long: pd.DataFrame, by=("policy_id",)) -> pd.DataFrame:
    """Sum a long table over everything but ``by`` and (k, l) (days, folds, logging policies): every column adds."""
    idx = [*by, "k", "l"] if "l" in long.columns else [*by, "k"]
    value = [c for c in long.columns if c not in idx and c not in ("dt", *KEYS)]
    return long.groupby(idx, as_index=False)[value].sum()


# ---- Cascade-DR's model (estimators/ranking.py) ----------------------------------------------------------------
def reward_model(rtg: pd.DataFrame, pseudo: float = PSEUDO_EVENTS) -> pd.DataFrame:
    """The q table from the log side's per (dt, fold, position, ad_id) sums (m events, s_rtg = sum of the reward-to-go
    r_k + ... of the slots they hold from k on): for the events of fold f, q_k(a) = (s(a) + c mbar_k) / (m(a) + c)
    over fold 1 - f of the same day (mbar_k: that fold's mean at position k, 0 where it holds none); one row per
    (dt, fold, position, ad) logged in the other fold, and one with ad_id None: mbar_k, the q of any other ad.
    Returns (dt, fold, position, ad_id, q): the relation scv_q of the Cascade-DR statement."""
    cols = ["dt", "fold", "position", "ad_id", "q"]
    if not len(rtg):
        return pd.DataFrame(columns=cols)
    t = rtg.groupby(["dt", "fold", "position", "ad_id"], as_index=False)[["m", "s_rtg"]].sum()
    pos = t.groupby(["dt", "fold", "position"], as_index=False)[["m", "s_rtg"]].sum()
    pos["mbar"] = np.where(pos["m"] > 0, pos["s_rtg"] / pos["m"].where(pos["m"] > 0, 1), 0.0)
    t = t.merge(pos[["dt", "fold", "position", "mbar"]], on=["dt", "fold", "position"])
    t["q"] = (t["s_rtg"] + pseudo * t["mbar"]) / (t["m"] + pseudo)
    out = []
    for f in (0, 1):                        # applied to fold f: fitted on fold 1 - f
        ads = t[t["fold"] == 1 - f].assign(fold=f)
        days = pos[["dt", "position"]].drop_duplicates()
        other = pos[pos["fold"] == 1 - f][["dt", "position", "mbar"]]
        default = days.merge(other, on=["dt", "position"], how="left").fillna({"mbar": 0.0})
        default = default.assign(fold=f, ad_id=None, q=default["mbar"])
        out += [ads[cols], default[cols]]
    q = pd.concat(out, ignore_index=True)
    q["fold"] = q["fold"].astype("int64")
    q["position"] = q["position"].astype("int64")
    return q.sort_values(["dt", "fold", "position", "ad_id"], na_position="last").reset_index(drop=True)
