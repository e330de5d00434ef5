"""Dependence in contingency tables, one group at a time: Pearson chi-square and bias-corrected Cramer's V (check a,
seed 001 Theorem 3 condition (2)) and check d's pooled within-stratum form (seed 002 section 2). :mod:`.vector`
computes the same numbers for every group at once (and check a's pooled form, ``pooled_chi2``)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def chi2_cramers_v(table: np.ndarray) -> dict:
    """Pearson chi-square and Cramer's V of an r x c table (empty rows/columns dropped).

    chi2 = sum (O - E)^2 / E, E = R_i C_j / n;  V = sqrt(chi2 / (n min(r-1, c-1)));
    bias-corrected (Bergsma 2013): phi2c = max(0, chi2/n - (r-1)(c-1)/(n-1)), r~ = r - (r-1)^2/(n-1),
    c~ likewise, V_bc = sqrt(phi2c / min(r~-1, c~-1)). Used by check a (seed 001 Theorem 3 condition (2)).
    """
    from ..estimators.distributions import chi2_sf

    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0] if t.size else t
    r, c = t.shape if t.ndim == 2 else (0, 0)
    n = float(t.sum()) if t.size else 0.0
    if r < 2 or c < 2 or n < 2:
        return {"chi2": 0.0, "dof": 0, "p_value": 1.0, "v": 0.0, "v_bc": 0.0, "n": n, "r": r, "c": c}
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    dof = (r - 1) * (c - 1)
    v = np.sqrt(chi2 / (n * min(r - 1, c - 1)))
    phi2c = max(0.0, chi2 / n - dof / (n - 1))
    rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    denom = min(rc - 1, cc - 1)
    v_bc = float(np.sqrt(phi2c / denom)) if denom > 0 else 0.0
    return {"chi2": chi2, "dof": dof, "p_value": chi2_sf(chi2, dof), "v": float(v),
            "v_bc": v_bc, "n": n, "r": r, "c": c}


def stratified_dependence(strata: pd.DataFrame) -> dict:
    """Pooled within-stratum dependence of two slots from per-stratum sums (check d).

    Per stratum s: chi2_s = n_s (S_s - 1) with S_s = sum_cells O^2 / (R_a C_b) (the Pearson identity), null
    expectation E0_s = (r_s - 1)(c_s - 1) n_s / (n_s - 1) (exact under fixed margins);
    V_pooled = sqrt(max(0, sum_s (chi2_s - E0_s)) / sum_s n_s min(r_s - 1, c_s - 1)).
    Collisions: O = events with the same ad in both slots, E = sum_s sum_a R_s(a) C_s(a) / n_s (product of the
    slot marginals, seed 002's factorized mu).

    Only strata that can show a dependence are tested: n_s >= 2, r_s >= 2, c_s >= 2 and n_s > max(r_s, c_s). Where
    every event of a stratum shows a different ad in one slot (n_s = r_s or n_s = c_s, e.g. a context_id unique
    per event or pair of events), chi2_s = E0_s whatever the logger does, so such strata would only dilute V.
    n_tested counts the events of the tested strata; the collision sums use the strata of >= 2 events (n_pairs
    events: a one-event stratum has O = E by construction).
    """
    informative = (strata["n"] >= 2) & (strata["r"] >= 2) & (strata["c"] >= 2)
    s = strata[informative & (strata["n"] > strata["r"]) & (strata["n"] > strata["c"])]
    pairs = strata[strata["n"] >= 2]
    chi2 = (s["n"] * (s["s"] - 1.0)).clip(lower=0.0)
    e0 = (s["r"] - 1) * (s["c"] - 1) * s["n"] / (s["n"] - 1)
    denom = float((s["n"] * np.minimum(s["r"] - 1, s["c"] - 1)).sum())
    excess = float((chi2 - e0).sum())
    v = float(np.sqrt(max(0.0, excess) / denom)) if denom > 0 else 0.0
    o, e = float(pairs["o_diag"].sum()), float(pairs["e_diag"].sum())
    return {"chi2": float(chi2.sum()), "dof": float(((s["r"] - 1) * (s["c"] - 1)).sum()), "v_pooled": v,
            "strata": int(len(s)), "n": float(strata["n"].sum()), "n_tested": float(s["n"].sum()),
            "n_pairs": float(pairs["n"].sum()), "collisions_observed": o, "collisions_expected": e,
            "collision_ratio": (o / e) if e > 0 else float("nan")}
