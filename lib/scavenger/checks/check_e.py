"""Check e, propensity calibration (seed 002: mu_k must be the true marginals), the verdicts over the tables of
:mod:`.calibration`. Per (policy, position) the (day, ad) cells are tested; per policy each ad is also tested over
all its days and positions (``e.calibration_window``). A cell is off past 10%, 4 sigma and an exact binomial p-value
under 0.001 / cells tested (Bonferroni). A policy whose propensity varies within most cells (history- or
context-dependent logging, e.g. OBD's Thompson sampling) is reported as not testable (warn)."""
from __future__ import annotations

import pandas as pd

from .calibration import bonferroni_z, calibration_cells, rounding_slack, window_calibration
from .verdict import FAIL, PASS, WARN, AssumptionConfig, row


def check_e(slot: pd.DataFrame, events: pd.DataFrame, cfg: AssumptionConfig, scope_note=None,
            scope_hint=None) -> list[dict]:
    """Propensity calibration per (policy, position), stratified by day (and by the calibration scope's stratum
    when the tables carry one), plus per policy the window test of :func:`.calibration.window_calibration`.
    ``scope_note`` (a string, or a dict policy -> string) says in the messages where the cells were matched;
    ``scope_hint`` (likewise) ends a policy's fail messages (e.g. which --calibration-scope to try when its pooled
    cells mix contexts, :func:`.calibration.mixed_scope`).

    A cell is off when |O/E - 1| > calib_tol, |z| > calib_z and its p-value (exact binomial per cell; for the
    window's sums the binomial of all the ad's slates at their mean propensity, exact when the propensity is
    constant and conservative otherwise) is below calib_alpha / m, m the cells tested by the check (Bonferroni;
    the window's ads are a second family). Without the m, 120,000 calibrated (day, position, ad) cells of 10M
    uniform events gave 10 cells past |z| = 4 (7.6 expected by chance) and a false failure."""
    cells = calibration_cells(slot, events, cfg.min_expected)
    # a policy whose propensity varies within most cells seen twice or more logs input- or history-dependent
    # propensities (e.g. OBD's Bernoulli Thompson Sampling): the few cells that look constant are those seen
    # rarely, and testing them would only report the dependence, not a calibration error
    seen_twice = cells[cells["n_p"] >= 2]
    varying_share = (~seen_twice["constant"]).groupby(seen_twice["logging_policy"]).mean()
    dependent = set(varying_share[varying_share > cfg.calib_max_varying].index)
    out = _position_rows(cells, dependent, varying_share, cfg, scope_note, scope_hint)
    if cells.empty:
        return out
    return out + _window_rows(cells, dependent, cfg, scope_note, scope_hint)


def _where(scope_note, policy) -> str:
    note = scope_note.get(policy, "") if isinstance(scope_note, dict) else (scope_note or "")
    return f" ({note})" if note else ""


def _hint(scope_hint, policy) -> str:
    hint = scope_hint.get(policy, "") if isinstance(scope_hint, dict) else (scope_hint or "")
    return f"; {hint}" if hint else ""


def _calibration_cut(cfg: AssumptionConfig, tested: int, unit: str):
    """Check e's significance over a family of ``tested`` cells or ads: a mask function (|z| > calib_z and
    p < calib_alpha / tested, Bonferroni) and the words the pass messages use for it."""
    p_cut = cfg.calib_alpha / max(tested, 1)
    z_cut = max(cfg.calib_z, bonferroni_z(cfg.calib_alpha, tested))
    text = (f"{cfg.calib_z} sigma and p < {cfg.calib_alpha:g}/{tested} (|z| > {z_cut:.2f}; Bonferroni over the "
            f"{tested} {unit} tested)")
    return (lambda t: (t["z"].abs() > cfg.calib_z) & (t["p_value"] < p_cut)), text


def _position_rows(cells: pd.DataFrame, dependent: set, varying_share: pd.Series, cfg: AssumptionConfig,
                   scope_note, scope_hint=None) -> list[dict]:
    """One ``e.calibration`` row per (policy, position): not testable, or its (day, ad) cells judged."""
    tested = cells["testable"] & ~cells["logging_policy"].isin(dependent)
    significant, family = _calibration_cut(cfg, int(tested.sum()), "cells")
    # per (policy, position) at once: the rows of groups with nothing to test are written from these counts, so
    # only groups holding a testable cell (at least 5 expected impressions each) get the per-group work below
    keys = ["logging_policy", "position"]
    counts = cells.assign(_varying=~cells["constant"]).groupby(keys, sort=True).agg(
        cells_n=("constant", "size"), varying=("_varying", "sum"), testable=("testable", "sum"))
    rows_of = cells.groupby(keys, sort=True).indices if len(cells) else {}
    out = []
    for (policy, pos), c in counts.iterrows():
        scope = f"policy={policy} position={pos}"
        where = _where(scope_note, policy)
        varying = int(c["varying"])
        if policy in dependent:
            share = float(varying_share[policy])
            out.append(row("e.calibration", scope, share, cfg.calib_max_varying, WARN,
                           f"not testable{where}: the logged propensity varies within {share:.0%} of this policy's "
                           f"(day, position, ad) cells seen twice or more (> {cfg.calib_max_varying:.0%}), so its "
                           f"logging depends on the context or on time within a day; observed frequencies cannot "
                           f"confirm per-event propensities (importance weights still use them as logged)"))
        elif not c["testable"]:
            out.append(row("e.calibration", scope, None, cfg.calib_tol, WARN,
                           f"no testable cell{where}: {varying} of {int(c['cells_n'])} (day, ad) cells have a "
                           f"propensity that varies (logging is not input-independent) or too few expected "
                           f"impressions"))
        else:
            out.append(_cells_row(cells.iloc[rows_of[(policy, pos)]], scope, where, varying, significant, family,
                                  cfg, _hint(scope_hint, policy)))
    return out


def _cells_row(g: pd.DataFrame, scope: str, where: str, varying: int, significant, family: str,
               cfg: AssumptionConfig, hint: str = "") -> dict:
    """The verdict of one (policy, position)'s (day, ad) cells, at least one of them testable: fail when the
    constant propensities of a day sum past 1 or a cell is significantly off, else pass."""
    strat = "stratum" in g.columns
    const = g[g["constant"]]
    by = ["dt", "stratum"] if strat else ["dt"]
    sum_p = const.groupby(by)["p"].sum()
    # logged rounding: each ad's propensity may be up to half a unit of its last decimal high (rounding_slack)
    slack = pd.Series(rounding_slack(const["p"]), index=const.index).groupby([const[k] for k in by]).sum() + 1e-6
    t = g[g["testable"]]
    sig = t[significant(t)]
    bad = sig[sig["rel"].abs() > cfg.calib_tol]
    # statistic: the largest relative deviation among cells whose deviation is significant (see check_e)
    stat = float(sig["rel"].abs().max()) if not sig.empty else 0.0
    over = sum_p[sum_p > 1 + slack.reindex(sum_p.index)]
    if not over.empty:
        worst_key = over.idxmax()
        in_stratum = f" in stratum {worst_key[1]}" if strat else ""
        return row("e.calibration", scope, float(over.max()), 1.0, FAIL,
                   f"logged propensities of the shown ads sum to {float(over.max()):.4f} > 1 + "
                   f"{float(slack[worst_key]):.2g}{in_stratum} on {len(over)} (day{', stratum' if strat else ''}) "
                   f"group(s){where} (tolerance for logged rounding: half a unit of each propensity's last "
                   f"decimal, at most of the 3rd, + 1e-6): the serving system logs wrong propensities{hint}")
    if not bad.empty:
        w = bad.loc[bad["rel"].abs().idxmax()]
        in_stratum = f" (stratum {w['stratum']})" if strat else ""
        return row("e.calibration", scope, stat, cfg.calib_tol, FAIL,
                   f"{len(bad)} of {len(t)} (day, ad) cells off{where}: e.g. ad {w['ad_id']}{in_stratum} on "
                   f"{w['dt']} shown {int(w['n'])} times, {w['expected']:.1f} expected from its logged "
                   f"propensity {w['p']:.4g} (z={w['z']:.1f}, p={w['p_value']:.2g}); the logged propensities "
                   f"are not the serving probabilities -- fix the logging before using importance weights{hint}")
    max_rel = float(t["rel"].abs().max())
    chi2 = float((t["z"] ** 2).sum())
    return row("e.calibration", scope, stat, cfg.calib_tol, PASS,
               f"{len(t)} (day, ad) cells{where}, none off by more than {family} and "
               f"{cfg.calib_tol:.0%} (max |O/E-1|={max_rel:.4f}, sum z^2={chi2:.1f})"
               + (f"; {varying} cells not tested (propensity varies)" if varying else ""))


def _window_rows(cells: pd.DataFrame, dependent: set, cfg: AssumptionConfig, scope_note,
                 scope_hint=None) -> list[dict]:
    """One ``e.calibration_window`` row per policy with a testable ad: each ad over the window's days and
    positions (:func:`.calibration.window_calibration`)."""
    strat = "stratum" in cells.columns
    window = window_calibration(cells, cfg.min_expected)
    tested = window["testable"] & ~window["logging_policy"].isin(dependent)
    significant, family = _calibration_cut(cfg, int(tested.sum()), "ads")
    window = window[window["logging_policy"].isin(set(window.loc[tested, "logging_policy"]))]   # the rest: skipped
    out = []
    for policy, g in window.groupby("logging_policy", sort=True):
        scope = f"policy={policy}"
        where = _where(scope_note, policy)
        t = g[g["testable"]]
        if t.empty or policy in dependent:
            continue            # the per-position rows already say why nothing is testable
        sig = t[significant(t)]
        bad = sig[sig["rel"].abs() > cfg.calib_tol]
        stat = float(sig["rel"].abs().max()) if not sig.empty else 0.0
        if not bad.empty:
            w = bad.loc[bad["rel"].abs().idxmax()]
            in_stratum = f" (stratum {w['stratum']})" if strat else ""
            out.append(row("e.calibration_window", scope, stat, cfg.calib_tol, FAIL,
                           f"{len(bad)} of {len(t)} ads off over the window's days and positions{where}: e.g. ad "
                           f"{w['ad_id']}{in_stratum} shown {int(w['n'])} times, {w['expected']:.1f} expected from "
                           f"its logged propensities (z={w['z']:.1f}, p={w['p_value']:.2g}, O/E-1={w['rel']:.3f}); "
                           f"the logged propensities are not the serving probabilities -- fix the logging before "
                           f"using importance weights{_hint(scope_hint, policy)}"))
        else:
            out.append(row("e.calibration_window", scope, stat, cfg.calib_tol, PASS,
                           f"{len(t)} ads over the window's days and positions{where}, none off by more than "
                           f"{family} and {cfg.calib_tol:.0%} (max |O/E-1|="
                           f"{float(t['rel'].abs().max()):.4f}, sum z^2={float((t['z'] ** 2).sum()):.1f})"))
    return out
