"""Check f, reward interaction: does the reward at position k depend on the ad at a position j < k? Factorized
logging (seed 002 section 2) draws a_j independently of a_k given the context, so under additive slots
(E[w_k | x, A] = f_k(x, a_k), what the PI family, independent IPS and the ADC-based estimators assume) the reward
at k does not depend on a_j within a context; under a cascade (a click above takes the click below) it does.

Per (logging policy, j, k), two stratified tests over the window's table (statistics/sql/interaction_tables.py:
per ad g at j, sums over the (day, fold, context_id) strata s), each exact or conservative however sparse the
strata:

  by ad      Q = sum_g d_g^2 / v_g ~ chi2(G - 1), the generalized Cochran-Mantel-Haenszel ("mean score")
             statistic D' V^- D with the exact permutation variance V = sum_s c_s (diag(n_s) - n_s n_s'/n_s)
             replaced by diag(a) - a a'/A (a = v, A = sum a). The two are equal when every stratum shows the ads in
             the same proportions, the replacement is larger otherwise (by the proportions' covariance over the
             strata), so Q is at most the exact statistic: conservative. diag(1/a) is a generalized inverse of
             diag(a) - a a'/A, hence the sum. Sees an ad that changes the reward below it in every context.
  by trend   T^2 / V ~ chi2(1), T = sum_g t_g, V = sum_g vt_g: the stratified linear-trend (Mantel) statistic of
             the reward at k on x, the ad's click rate at j in the same context from the other fold, with its exact
             permutation variance. Sees a cascade whose ads' click rates change from context to context.

effect = the bias-corrected root-mean-square difference of the reward at k explained, relative to its mean:
sqrt(A max(0, Q - dof)) / (N |m|) by ad, sqrt(max(0, T^2 - V) / (Sxx N)) / |m| by trend (N tested events, m their
mean reward at k, Sxx = sum_g sxx_g). A pair fails when a test's p < interaction_alpha / (tests made) (Bonferroni
over both tests of every pair: additive logs fail with probability at most interaction_alpha) and its effect
exceeds interaction_tol. Fewer than min_table_n events in strata of two or more: cannot judge (warn).

Many ads at j (more than ``interaction_groups``) are ranked into that many click-rate groups by their click rate
at j in the other fold (the md5 halves of event_id), so a group is fixed before this fold's rewards are seen: a
click-prone user shared by w_j and w_k cannot make a spurious dependence.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .verdict import FAIL, PASS, WARN, AssumptionConfig, row

CHECK = "f.reward_interaction"
UNRATED = "unrated"      # the group of ads the other fold never shows at j (no click rate to rank them by)
STRATA = "(context, day, ad at k) strata"
SUMS = ("n", "s_r", "s_r2", "n_tested", "d", "v", "t", "vt", "sxx", "n_j", "s_j")


def check_f(cells: pd.DataFrame, cfg: AssumptionConfig, relying=(), valid=()) -> list[dict]:
    """Reward interaction per (policy, j, k); ``relying``: the estimators that assume additive slots (check f),
    ``valid``: those that do not (named in the messages; the registry knows them, checks/judge.py asks it)."""
    if len(cells):      # the window's days summed (each day's strata are its own: the sums add up)
        keys = ["logging_policy", "fold", "j", "ad_id", "k"]
        cells = cells.groupby(keys, as_index=False, sort=True)[list(SUMS)].sum()
        cells = cells[cells["n"] > 0]
    if not len(cells):
        return [row(CHECK, "all", None, cfg.interaction_tol, WARN,
                    "not testable: no event shows an ad at a position above another position whose slot reward is "
                    "known (one position per event, or slate rewards only)")]
    groups = pair_groups(ad_groups(cells, cfg.interaction_groups))
    tests = {key: interaction_test(g) for key, g in groups.groupby(["logging_policy", "j", "k"], sort=True)}
    # Bonferroni over every test made: two per pair (the ads' groups, the click-rate trend) where each applies
    tested = sum(len(_applicable(t, cfg)) for t in tests.values())
    return [_verdict(t, f"policy={policy} slots={j},{k}", int(j), int(k), tested, cfg, relying, valid)
            for (policy, j, k), t in tests.items()]


def ad_groups(cells: pd.DataFrame, most: int) -> pd.DataFrame:
    """``cells`` with ``group`` (the ad itself, or its click-rate group when position j shows more than ``most``
    ads, then ``bucketed``). A fold's rows are ranked by the other fold's click rate at j:
    groups of about equal impressions (there), "ctr i/G" from the lowest rate; ads that fold never shows: UNRATED."""
    out = cells.assign(group=cells["ad_id"].astype(str), bucketed=False)
    per_ad = cells.sort_values("k", kind="mergesort").groupby(["logging_policy", "fold", "j", "ad_id"],
                                                             sort=True).first()
    many = cells.groupby(["logging_policy", "j"])["ad_id"].nunique()
    for (policy, j), n_ads in many.items():
        if n_ads <= most:
            continue
        for fold in (0, 1):
            mine = (out["logging_policy"] == policy) & (out["j"] == j) & (out["fold"] == fold)
            rank = _click_rate_groups(per_ad, policy, 1 - fold, j, most)
            out.loc[mine, "group"] = out.loc[mine, "ad_id"].map(rank).fillna(UNRATED)
            out.loc[mine, "bucketed"] = True
    return out


def _click_rate_groups(per_ad: pd.DataFrame, policy, fold: int, j, most: int) -> dict:
    """{ad: "ctr i/G"} from ``fold``'s known rewards at j: ads sorted by click rate (then id), cut where the
    cumulative impressions pass i/G of the fold's."""
    try:
        g = per_ad.loc[(policy, fold, j)]
    except KeyError:
        return {}
    g = g[g["n_j"] > 0]
    if not len(g):
        return {}
    ctr = (g["s_j"] / g["n_j"]).rename("ctr").reset_index().assign(n_j=g["n_j"].to_numpy())
    ctr = ctr.sort_values(["ctr", "ad_id"], kind="mergesort")
    mid = (ctr["n_j"].cumsum() - ctr["n_j"] / 2) / ctr["n_j"].sum()
    idx = np.minimum((mid * most).astype(int), most - 1) + 1
    return dict(zip(ctr["ad_id"], [f"ctr {i}/{most}" for i in idx]))


def pair_groups(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, j, k, group): the sums over folds and ads, and ``ads`` (how many ads the group holds)."""
    keys = ["logging_policy", "j", "k", "group"]
    return cells.groupby(keys, as_index=False, sort=True).agg(
        n=("n", "sum"), s_r=("s_r", "sum"), n_tested=("n_tested", "sum"), d=("d", "sum"), v=("v", "sum"),
        t=("t", "sum"), vt=("vt", "sum"), sxx=("sxx", "sum"), n_j=("n_j", "sum"), s_j=("s_j", "sum"),
        ads=("ad_id", "nunique"), ad=("ad_id", "first"),
        bucketed=("bucketed", "max"))


def interaction_test(g: pd.DataFrame) -> dict:
    """Both statistics of one (policy, j, k) from its groups' sums (module doc): ``groups`` (Q over the ad groups,
    G - 1 dof) and ``trend`` (T^2 / V, 1 dof; slope T / Sxx), each with its p-value and effect."""
    from ..estimators.distributions import chi2_sf

    n_tested, A = float(g["n_tested"].sum()), float(g["v"].sum())
    mean = float(g["s_r"].sum() / g["n"].sum())
    scale = n_tested * abs(mean)
    live = g[g["v"] > 0]
    q, dof = float((live["d"] ** 2 / live["v"]).sum()), len(live) - 1
    T, V, sxx = (float(g[c].sum()) for c in ("t", "vt", "sxx"))
    out = {"testable": A > 0, "mean": mean, "n": float(g["n"].sum()), "n_tested": n_tested, "groups": len(g),
           "table": g, "tests": {}}
    if dof >= 1:
        effect = np.sqrt(A * max(0.0, q - dof)) / scale if scale > 0 else (np.inf if q > dof else 0.0)
        out["tests"]["groups"] = {"stat": q, "dof": dof, "p": chi2_sf(q, dof), "effect": float(effect)}
    if V > 0 and sxx > 0:
        effect = np.sqrt(max(0.0, T * T - V) / (sxx * n_tested)) / abs(mean) if mean else (
            np.inf if T * T > V else 0.0)
        out["tests"]["trend"] = {"stat": T * T / V, "dof": 1, "p": chi2_sf(T * T / V, 1), "effect": float(effect),
                                 "slope": T / sxx, "z": T / np.sqrt(V)}
    return out


def _applicable(t: dict, cfg: AssumptionConfig) -> dict:
    return t["tests"] if t["n_tested"] >= cfg.min_table_n and t["testable"] else {}


def _verdict(t: dict, scope: str, j: int, k: int, tested: int, cfg: AssumptionConfig, relying, valid) -> dict:
    """One row: cannot judge, nothing to test, fail (a test significant and material), or pass."""
    where = f"slot {k}'s reward against slot {j}'s ad"
    if t["n_tested"] < cfg.min_table_n:
        return row(CHECK, scope, None, cfg.interaction_tol, WARN,
                   f"cannot judge {where}: only {t['n_tested']:.0f} of {t['n']:.0f} events are in {STRATA} of two "
                   f"events or more (< {cfg.min_table_n}) -- widen the window or log a coarser context_id")
    tests = _applicable(t, cfg)
    if not tests:
        why = (f"the reward at position {k} never varies within a stratum" if not t["testable"] else
               f"position {j} shows one ad only, at one click rate, within the strata where the reward at {k} "
               f"varies")
        return row(CHECK, scope, 0.0, cfg.interaction_tol, PASS if not t["testable"] else WARN,
                   f"nothing to test for {where}: {why} ({t['n_tested']:.0f} events)")
    p_cut = cfg.interaction_alpha / max(tested, 1)
    significant = {name: x for name, x in tests.items() if x["p"] < p_cut}
    failing = {name: x for name, x in significant.items() if x["effect"] > cfg.interaction_tol}
    numbers = _numbers(t, tests, j)
    if failing:
        return row(CHECK, scope, max(x["effect"] for x in failing.values()), cfg.interaction_tol, FAIL,
                   f"the reward at position {k} depends on the ad at position {j} within {STRATA}: "
                   f"{_seen(t, failing, j)} ({numbers}; p < {cfg.interaction_alpha:g}/{tested} and a difference past "
                   f"{cfg.interaction_tol:.0%} of the mean): rewards interact across positions (a cascade: a click "
                   f"above changes the clicks below), so slate rewards are not sums of what each slot earns on its "
                   f"own{_estimators(relying, valid)}")
    small = (f"; significant but below {cfg.interaction_tol:.0%} of the mean: no material interaction"
             if significant else "")
    return row(CHECK, scope, max(x["effect"] for x in tests.values()), cfg.interaction_tol, PASS,
               f"no interaction seen: {where} over {t['groups']} ad group(s) ({numbers}){small}")


def _numbers(t: dict, tests: dict, j: int) -> str:
    """The tests' numbers, for the messages."""
    parts = []
    if "groups" in tests:
        x = tests["groups"]
        parts.append(f"by ad: chi2={x['stat']:.1f}, dof={x['dof']}, p={x['p']:.2g}, difference {x['effect']:.1%}")
    if "trend" in tests:
        x = tests["trend"]
        parts.append(f"by the ad's click rate at {j} in its context: slope {x['slope']:+.3g}, z={x['z']:+.1f}, "
                     f"p={x['p']:.2g}, difference {x['effect']:.1%}")
    return "; ".join(parts) + f"; {t['n_tested']:.0f} events, mean reward {t['mean']:.4g}"


def _seen(t: dict, failing: dict, j: int) -> str:
    """What the failing tests saw: the trend's direction and size, and the ad groups after which the reward at k
    is lowest and highest against their strata's means."""
    parts = []
    if "trend" in failing:
        slope = failing["trend"]["slope"]
        parts.append(f"it is {'lower' if slope < 0 else 'higher'} after the ads clicked more at position {j} in the "
                     f"same context ({abs(slope) * 0.1:.3g} {'less' if slope < 0 else 'more'} for 0.1 more click "
                     f"rate at {j})")
    if "groups" in failing:
        g = t["table"]
        g = g[g["n_tested"] > 0].assign(delta=lambda x: x["d"] / x["n_tested"])
        by = [f"{r['delta']:+.3g}" + (f" ({r['delta'] / t['mean']:+.0%})" if t["mean"] else "") +
              f" after {_name(r, j)}" for r in (g.loc[g["delta"].idxmin()], g.loc[g["delta"].idxmax()])]
        parts.append(f"{by[0]} and {by[1]}, against the same strata's mean")
    return "; ".join(parts)


def _name(r, j: int) -> str:
    ctr = f"click rate {r['s_j'] / r['n_j']:.3g} at position {j}" if r["n_j"] > 0 else "no known reward at " \
                                                                                       f"position {j}"
    if r["bucketed"] and r["group"] == UNRATED:
        return f"the {r['ads']} position-{j} ad(s) the other fold never shows there ({ctr})"
    if r["bucketed"]:
        return f"position-{j} ads of click-rate group {r['group'][4:]} ({r['ads']} ads, {ctr})"
    return f"position-{j} ad {r['ad']} ({ctr})"


def _estimators(relying, valid) -> str:
    out = ""
    if relying:
        out += f"; the estimators that assume additive slots are biased here: {', '.join(relying)}"
    if valid:
        out += f"; still valid (they do not assume additive slots): {', '.join(valid)}"
    return out
