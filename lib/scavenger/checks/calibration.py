"""The numbers of check e, propensity calibration (seed 002: the logged mu_k must be the true marginals): where
the logged propensity p of (policy, day, position, ad) is constant (logging independent of the input), the observed
count M must match n_events * p. The scope where logging is input-independent is per logging policy and, by
default (``calibration_scope="auto"``), per value of context_id when context_id partitions the ads (the Open Bandit
Dataset's campaigns: each has its own items and propensities, so pooled they would sum to 3); ``context:<key>``
scopes by a context-map value. :mod:`.check_e` turns these tables into verdicts."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..statistics.tables import ordered_text, plain_text


def parse_calibration_scope(text: str | None) -> tuple[str, str | None]:
    """``(mode, key)`` of a check-e scope: mode ``policy`` (key None), ``auto`` (stratify by key where it
    partitions the ads) or ``fixed`` (always stratify by key). ValueError on anything else."""
    spec = (text or "auto").strip()
    if spec in ("policy", "none"):
        return "policy", None
    mode, key = ("auto", spec[len("auto:"):]) if spec.startswith("auto:") else \
        (("auto", "context_id") if spec == "auto" else ("fixed", spec))
    if key != "context_id" and not (key.startswith("context:") and len(key) > len("context:")):
        raise ValueError(f"calibration scope must be auto, auto:KEY, policy or KEY with KEY context_id or "
                         f"context:NAME; got {text!r}")
    return mode, key


MIN_PER_AD = 20.0   # a partition needs this many impressions per ad on average (partition_strata)


def _policy_values(slot: pd.DataFrame, min_per_ad: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per (policy, ad): lo, hi, n; per policy: split, n_values, ads, mean_n and ``why``, the first condition of a
    partition it misses: ``split`` an ad under two values or more, ``few_ads`` fewer than 2 ads per value, ``thin``
    fewer than ``min_per_ad`` impressions per ad on average, "" none) from the slot table's ``stratum_min`` /
    ``stratum_max``, every policy at once (one group-by)."""
    per_ad = plain_text(ordered_text(slot, ["stratum_min", "stratum_max"]).groupby(
        ["logging_policy", "ad_id"], sort=True, observed=True).agg(
        lo=("stratum_min", "min"), hi=("stratum_max", "max"), n=("n", "sum")), ["lo", "hi"])
    pol = per_ad.assign(split=per_ad["lo"] != per_ad["hi"]).groupby(level=0).agg(
        split=("split", "any"), n_split=("split", "sum"), n_values=("lo", "nunique"), ads=("n", "size"),
        mean_n=("n", "mean"))
    pol["why"] = np.select([pol["split"], pol["ads"] < 2 * pol["n_values"], pol["mean_n"] < min_per_ad],
                           ["split", "few_ads", "thin"], default="")
    return per_ad, pol[pol["n_values"] >= 2]


def partition_strata(slot: pd.DataFrame, min_per_ad: float = MIN_PER_AD) -> dict:
    """Per logging policy whose ads the scope key partitions: ad_id -> its one value (from the ``stratum_min`` /
    ``stratum_max`` of the slot table, checks/judge.slot_table). A partition needs >= 2 values, every ad under one
    value only, >= 2 ads per value and >= ``min_per_ad`` impressions per ad on average (a sparse table looks like a
    partition by chance)."""
    if slot.empty or "stratum_min" not in slot.columns:
        return {}
    per_ad, pol = _policy_values(slot, min_per_ad)
    return {policy: per_ad.loc[policy, "lo"] for policy in pol.index[pol["why"] == ""]}


def no_partition_reasons(slot: pd.DataFrame, key: str, min_per_ad: float = MIN_PER_AD) -> dict:
    """Per logging policy whose ads show >= 2 values of ``key`` but that :func:`partition_strata` found no partition
    for: why, with the counts (an ad under two values or more; fewer than 2 ads per value; or too few impressions
    per ad to tell a partition from chance, where the check cannot judge and says the minimum it needs)."""
    if slot.empty or "stratum_min" not in slot.columns:
        return {}
    _, pol = _policy_values(slot, min_per_ad)
    said = {
        "split": lambda p: f"no partition of the ads by {key}: {int(p['n_split'])} of its {int(p['ads'])} ads are "
                           f"shown under two values or more",
        "few_ads": lambda p: f"no partition of the ads by {key}: {int(p['ads'])} ads over {int(p['n_values'])} "
                             f"values, fewer than the 2 per value a partition needs",
        "thin": lambda p: f"cannot judge whether {key} partitions the ads: its {int(p['ads'])} ads were shown "
                          f"{float(p['mean_n']):.1f} times each on average, and telling a partition from chance "
                          f"needs at least {min_per_ad:g} impressions per ad on average; widen the window"}
    return {policy: said[p["why"]](p) for policy, p in pol[pol["why"] != ""].iterrows()}


def mixed_scope(slot: pd.DataFrame, strata: dict) -> dict:
    """Per logging policy not in ``strata`` (its ads are pooled): how many values of the scope key its impressions
    show (``stratum_min`` / ``stratum_max`` of the slot table), for the policies with 2 or more. Pooled cells that
    mix contexts sum the propensities of every context's ads (an ad eligible under two contexts keeps the pooled
    test from finding a partition), so check e's fail messages say which scope to try."""
    if slot.empty or "stratum_min" not in slot.columns:
        return {}
    s = slot[~slot["logging_policy"].isin(set(strata))]
    values = pd.concat([s[["logging_policy", "stratum_min"]].set_axis(["logging_policy", "v"], axis=1),
                        s[["logging_policy", "stratum_max"]].set_axis(["logging_policy", "v"], axis=1)])
    k = values.dropna().astype(str).groupby("logging_policy")["v"].nunique()
    return {p: int(n) for p, n in k.items() if n >= 2}


def calibration_slot(slot: pd.DataFrame, strata: dict) -> pd.DataFrame:
    """The slot table with a ``stratum`` column: the ad's value for the policies in ``strata`` (see
    :func:`partition_strata`), ``all`` elsewhere."""
    out = slot.drop(columns=[c for c in ("stratum_min", "stratum_max") if c in slot.columns])
    stratum = pd.Series("all", index=out.index, dtype=object)
    for policy, of_ad in strata.items():
        m = out["logging_policy"] == policy
        stratum[m] = out.loc[m, "ad_id"].map(of_ad).astype(object)
    return out.assign(stratum=stratum)


def calibration_cells(slot: pd.DataFrame, events: pd.DataFrame, min_expected: float) -> pd.DataFrame:
    """Per (policy, [stratum,] dt, position, ad) with a constant logged propensity p: E = N * p with N the slates
    of (policy, [stratum,] dt) showing that position, O = M, z = (O - E) / sqrt(E (1 - p)), rel = O / E - 1
    (check e; seed 002: mu_k must be the true marginals). ``events`` has logging_policy, [stratum,] dt,
    position, events; with a ``stratum`` column in both tables the cells are matched within it."""
    keys = ["logging_policy", "dt", "position"]
    if "stratum" in slot.columns and "stratum" in events.columns:
        keys.insert(1, "stratum")
    cells = slot.merge(events, on=keys, how="left")
    p = cells["sum_p"] / cells["n_p"].where(cells["n_p"] > 0)
    constant = (cells["max_p"] - cells["min_p"]).abs() <= 1e-9 * cells["max_p"].abs().clip(lower=1e-300)
    cells = cells.assign(p=p, constant=constant & p.notna())
    cells["expected"] = cells["events"] * cells["p"]
    var = cells["expected"] * (1.0 - cells["p"]).clip(lower=0.0)
    cells["z"] = (cells["n"] - cells["expected"]) / np.sqrt(var.where(var > 0))
    cells["rel"] = cells["n"] / cells["expected"] - 1.0
    cells["testable"] = cells["constant"] & (cells["expected"] >= min_expected)
    cells["p_value"] = binomial_two_sided_p(cells["n"], cells["events"], cells["p"].where(cells["constant"]))
    return cells


def rounding_slack(p) -> np.ndarray:
    """Half a unit of the last decimal a logged propensity was written with, when it has 3 to 6 decimals (0.1429 ->
    0.00005, 0.143 -> 0.0005, 0.0125 -> 0.00005), at most half a unit of the 3rd decimal (0.25 -> 0.0005: a
    propensity of 1 or 2 decimals is taken as exact, not as a rounding), 0 beyond 6 decimals (written in full).
    Check e lets the shown ads of a day sum to 1 + the sum of these + 1e-6: 7 ads logged as round(1/7, 4) = 0.1429
    sum to 1.0003, not an error; 6 ads at 0.2 (1.2) or 80 ads at 1/80 and one at 2/80 (1.0125) still fail."""
    q = np.asarray(p, dtype=float)
    out = np.zeros(q.shape)
    left = np.isfinite(q)
    for d in range(0, 7):
        x = q * 10.0 ** d
        hit = left & (np.abs(x - np.round(x)) <= 1e-6)
        out[hit] = 0.5 * 10.0 ** -max(d, 3)
        left &= ~hit
    return out


def binomial_two_sided_p(observed, trials, p) -> np.ndarray:
    """Exact two-sided p-value of ``observed`` successes in ``trials`` draws with probability ``p`` (check e: under a
    calibrated logger M ~ Binomial(N, p)): min(1, 2 min(P[X <= O], P[X >= O])). NaN where ``p`` or ``trials`` is
    missing or p is outside [0, 1]. Exact where the normal z is not: with E = 5 and small p, |z| > 4 happens with
    probability 7.0e-4, 11 times the normal tail's 6.3e-5."""
    from ..estimators.distributions import binom_cdf, binom_sf

    o = np.asarray(observed, dtype=float)
    n = np.asarray(trials, dtype=float)
    q = np.asarray(p, dtype=float)
    ok = np.isfinite(o) & np.isfinite(n) & np.isfinite(q) & (q >= 0) & (q <= 1) & (n >= 0)
    out = np.full(o.shape, np.nan)
    if ok.any():
        lower = binom_cdf(o[ok], n[ok], q[ok])
        upper = binom_sf(o[ok] - 1, n[ok], q[ok])
        out[ok] = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    return out


def window_calibration(cells: pd.DataFrame, min_expected: float) -> pd.DataFrame:
    """Per (policy, [stratum,] ad): the constant-propensity cells of :func:`calibration_cells` summed over the
    window's days and positions: O = sum M, E = sum N p, var = sum N p (1 - p) (conservative for a ranked slate,
    whose positions cannot show the same ad twice), z and rel as per cell. One ad mis-logged by a factor is seen
    here with the power of all its impressions, where a single (day, position) cell holds only a few.

    p_value: the exact two-sided binomial p of O in T = sum N trials at the mean propensity E / T, as per cell:
    exact when the ad's propensity is constant over the window, and where it differs between cells the sum of
    binomials is less spread than this binomial (Hoeffding 1956), so the test stays at or under calib_alpha.
    The normal tail it replaces failed 6 of 100 calibrated windows of 2,000 ads at E = 5 each."""
    keys = ["logging_policy"] + (["stratum"] if "stratum" in cells.columns else []) + ["ad_id"]
    c = cells[cells["constant"]]
    c = c.assign(var=c["expected"] * (1.0 - c["p"]).clip(lower=0.0))
    out = c.groupby(keys, as_index=False).agg(n=("n", "sum"), expected=("expected", "sum"), var=("var", "sum"),
                                              trials=("events", "sum"), cells=("n", "size"))
    out["z"] = (out["n"] - out["expected"]) / np.sqrt(out["var"].where(out["var"] > 0))
    out["rel"] = out["n"] / out["expected"] - 1.0
    out["testable"] = out["expected"] >= min_expected
    p_mean = (out["expected"] / out["trials"].where(out["trials"] > 0)).clip(upper=1.0)
    out["p_value"] = binomial_two_sided_p(out["n"], out["trials"], p_mean)
    return out


def normal_two_sided_p(z) -> np.ndarray:
    """2 P[Z > |z|] for a standard normal Z; NaN stays NaN (check e's window rows, sums of many binomials)."""
    from ..estimators.distributions import normal_sf

    return 2.0 * normal_sf(np.abs(np.asarray(z, dtype=float)))


def bonferroni_z(alpha: float, tests: int) -> float:
    """The |z| a normal two-sided test must pass for p < alpha / tests (shown in check e's messages)."""
    from ..estimators.distributions import normal_isf

    return float(normal_isf(alpha / (2.0 * max(int(tests), 1))))
