"""Checks a, d, e over many groups at once: the statistics of every (policy, position, ...) group in a few pandas
group-bys, so that the work of a check grows with the rows of its tables, not with how many groups an input's
values make (10,000 logging-policy ids, one per event, made 160,000 groups of check a and one pivot table each).

    sparse_chi2(cells, keys, row, col)   per group: Pearson chi-square and Cramer's V of row x col from the
                                         non-zero cells only (no dense pivot: values x ads can be huge)
    pooled_chi2(per, keys)               per group: its strata's chi-squares pooled (check a within days and
                                         within a partitioning feature's strata)
    dependence_table(strata, keys)       per group: check d's pooled within-stratum dependence and collisions

Both give the numbers of their one-group counterparts in contingency.py (``chi2_cramers_v`` on the pivot table,
``stratified_dependence``) for every group, up to rounding.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CHI2_COLUMNS = ["n", "r", "c", "chi2", "dof", "p_value", "v", "v_bc"]


def sparse_chi2(cells: pd.DataFrame, keys: list, row: str, col: str, n: str = "n",
                unique: bool = False) -> pd.DataFrame:
    """Per group of ``keys``: the chi-square test of independence of ``row`` x ``col`` with counts ``n``.

    chi2 = N (sum_cells O^2 / (R C) - 1) (the Pearson identity, over non-zero cells), dof = (r-1)(c-1), V and
    the bias-corrected V_bc of :func:`scavenger.checks.contingency.chi2_cramers_v`; a group with r < 2, c < 2 or
    N < 2 gets chi2 = 0, p = 1, V = 0 as there. Indexed by ``keys`` (sorted). ``unique``: ``cells`` holds one row
    per (keys, row, col) already (a merged statistics table), so they are not summed first."""
    from ..estimators.distributions import chi2_sf

    if not len(cells):
        return pd.DataFrame(columns=CHI2_COLUMNS, index=pd.MultiIndex.from_tuples([], names=keys))
    if unique:
        d = cells[list(dict.fromkeys(keys + [row, col, n]))]
        d = d[(d[n] > 0) & d[keys + [row, col]].notna().all(axis=1)]
    else:
        d = cells.groupby(keys + [row, col], sort=False, as_index=False)[n].sum()
        d = d[d[n] > 0]
    # integer codes of the group, row and column values (one factorization each): the rest groups by integers
    grouped = d.groupby(keys, sort=True)
    group_keys = grouped.size().index
    d = pd.DataFrame({"g": grouped.ngroup().to_numpy(), "a": pd.factorize(d[row])[0], "b": pd.factorize(d[col])[0],
                      "n": d[n].to_numpy()})
    big_r = d.groupby(["g", "a"], sort=False)["n"].transform("sum").astype(float)
    big_c = d.groupby(["g", "b"], sort=False)["n"].transform("sum").astype(float)
    d = d.assign(_q=d["n"].astype(float) ** 2 / (big_r * big_c))
    g = d.groupby("g", sort=True)
    out = pd.DataFrame({"n": g["n"].sum().astype(float), "s": g["_q"].sum(), "r": g["a"].nunique(),
                        "c": g["b"].nunique()})
    out.index = group_keys.take(out.index.to_numpy())
    nn, r, c = out["n"], out["r"].astype(float), out["c"].astype(float)
    ok = (r >= 2) & (c >= 2) & (nn >= 2)
    chi2 = (nn * (out["s"] - 1.0)).clip(lower=0.0).where(ok, 0.0)
    dof = ((r - 1) * (c - 1)).where(ok, 0.0)
    v = np.sqrt(chi2 / (nn * np.minimum(r - 1, c - 1)).where(ok))
    phi2c = (chi2 / nn - dof / (nn - 1)).clip(lower=0.0)
    rc, cc = r - (r - 1) ** 2 / (nn - 1), c - (c - 1) ** 2 / (nn - 1)
    denom = np.minimum(rc - 1, cc - 1)
    v_bc = np.sqrt(phi2c / denom.where(denom > 0)).where(ok & (denom > 0), 0.0)
    out["chi2"], out["dof"] = chi2, dof.astype(int)
    out["p_value"] = pd.Series(chi2_sf(chi2.to_numpy(float), dof.to_numpy(float)), index=out.index).where(ok, 1.0)
    out["v"], out["v_bc"] = v.where(ok, 0.0).fillna(0.0), v_bc.fillna(0.0)
    out["r"], out["c"] = out["r"].astype(int), out["c"].astype(int)
    return out[CHI2_COLUMNS]


def pooled_chi2(per: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Per group of ``keys``: the strata of ``per`` (:func:`sparse_chi2` rows indexed by ``keys`` + the stratum
    levels) pooled as check d pools its strata. Over the strata that can show a dependence (r_s >= 2, c_s >= 2):
    chi2 and dof summed, V_bc = sqrt(max(0, sum chi2_s - sum dof_s n_s / (n_s - 1)) / sum n_s min(r_s - 1,
    c_s - 1)), V the same without the correction, p of the summed chi2 on the summed dof, ``levels`` = sum
    max(r_s, c_s), ``strata`` how many and ``n_tested`` their impressions. ``n`` and ``parts`` count every stratum;
    r and c are the most values and ads of one stratum."""
    from ..estimators.distributions import chi2_sf

    ok = (per["r"] >= 2) & (per["c"] >= 2)
    nn = per["n"].astype(float)
    frame = pd.DataFrame({
        "chi2": per["chi2"].where(ok, 0.0), "dof": per["dof"].where(ok, 0), "n": nn, "n_tested": nn.where(ok, 0.0),
        "e0": (per["dof"] * nn / (nn - 1)).where(ok, 0.0),
        "den": (nn * (per[["r", "c"]].min(axis=1) - 1)).where(ok, 0.0),
        "levels": per[["r", "c"]].max(axis=1).where(ok, 0), "strata": ok.astype(int), "parts": 1,
        "r": per["r"], "c": per["c"]}, index=per.index)
    g = frame.groupby(level=list(range(len(keys))), sort=True)
    out = g[["chi2", "dof", "n", "n_tested", "e0", "den", "levels", "strata", "parts"]].sum()
    out[["r", "c"]] = g[["r", "c"]].max()
    den = out["den"].where(out["den"] > 0)
    out["v_bc"] = (((out["chi2"] - out["e0"]).clip(lower=0.0) / den) ** 0.5).fillna(0.0)
    out["v"] = ((out["chi2"] / den) ** 0.5).fillna(0.0)
    dof = out["dof"].to_numpy(float)
    out["p_value"] = np.where(dof > 0, chi2_sf(out["chi2"].to_numpy(float), np.maximum(dof, 1.0)), 1.0)
    out["dof"] = out["dof"].astype(int)
    return out


def dependence_table(strata: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Per group of ``keys``: :func:`scavenger.checks.contingency.stratified_dependence` of its strata rows
    (columns chi2, dof, v_pooled, strata, n, n_tested, n_pairs, collisions_observed, collisions_expected,
    collision_ratio; see there for which strata are tested)."""
    s = strata
    tested = (s["n"] >= 2) & (s["r"] >= 2) & (s["c"] >= 2) & (s["n"] > s["r"]) & (s["n"] > s["c"])
    pairs = s["n"] >= 2
    n, r, c = s["n"].astype(float), s["r"].astype(float), s["c"].astype(float)
    chi2 = (n * (s["s"] - 1.0)).clip(lower=0.0).where(tested, 0.0)
    e0 = ((r - 1) * (c - 1) * n / (n - 1)).where(tested, 0.0)
    parts = pd.DataFrame({"chi2": chi2, "dof": ((r - 1) * (c - 1)).where(tested, 0.0),
                          "denom": (n * np.minimum(r - 1, c - 1)).where(tested, 0.0), "excess": chi2 - e0,
                          "strata": tested.astype(int), "n": n, "n_tested": n.where(tested, 0.0),
                          "n_pairs": n.where(pairs, 0.0), "o": s["o_diag"].astype(float).where(pairs, 0.0),
                          "e": s["e_diag"].astype(float).where(pairs, 0.0)})
    for k in keys:
        parts[k] = s[k].values
    g = parts.groupby(keys, sort=True).sum(numeric_only=True)
    out = pd.DataFrame(index=g.index)
    out["chi2"], out["dof"] = g["chi2"], g["dof"]
    out["v_pooled"] = np.sqrt(g["excess"].clip(lower=0.0) / g["denom"].where(g["denom"] > 0)).fillna(0.0)
    out["strata"], out["n"] = g["strata"].astype(int), g["n"]
    out["n_tested"], out["n_pairs"] = g["n_tested"], g["n_pairs"]
    out["collisions_observed"], out["collisions_expected"] = g["o"], g["e"]
    out["collision_ratio"] = g["o"] / g["e"].where(g["e"] > 0)
    return out
