"""Check d, factorized logging (seed 002 section 2: mu(A|X) = prod_k mu_k(A_k|X)): within context strata, slot j's
ad vs slot k's ad -- a pooled bias-corrected Cramer's V, and a collision test: the number of events showing the
same ad in both slots against its expectation under the product of the slot marginals (a ranked layout samples
without replacement, so it never repeats an ad although the marginals overlap). Only strata that can show a
dependence are pooled (contingency.stratified_dependence); when they hold fewer than min_table_n events (a context_id
unique per event or pair of events) the check cannot judge and warns, it never passes."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .verdict import FAIL, PASS, WARN, AssumptionConfig, row


def check_d(strata: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Factorized logging: per (policy, j, k) pooled within-context dependence and the collision test."""
    from .vector import dependence_table

    out = []
    table = dependence_table(strata, ["logging_policy", "j", "k"]).to_dict("index")
    for (policy, j, k), st in table.items():
        scope = f"policy={policy} slots={j},{k}"
        if st["n_tested"] < cfg.min_table_n:
            verdict = WARN
            msg = (f"cannot judge slot independence: only {st['n_tested']:.0f} of {st['n']:.0f} events are in "
                   f"{st['strata']} (context, day) strata that can show a dependence (< {cfg.min_table_n}; a stratum "
                   f"needs >= 2 ads in each slot and more events than ads in either slot) -- {COARSER}")
        elif st["v_pooled"] > cfg.factor_v_max:
            verdict = FAIL
            msg = (f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata (chi2={st['chi2']:.1f}, "
                   f"dof={st['dof']:.0f}): slot {k}'s ad depends on slot {j}'s given the context, so the logging "
                   f"policy does not factorize and PI/PI++ are biased (seed 002); use IPS with the joint propensity")
        else:
            verdict = PASS
            msg = (f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata ({st['n_tested']:.0f} "
                   f"events): no material dependence")
        out.append(row("d.slot_dependence", scope, st["v_pooled"], cfg.factor_v_max, verdict, msg))
        out.append(_collision_row(st, scope, j, k, cfg))
    return out


COARSER = ("widen the window or log a coarser context_id (the strata are context_id x day)")


def _collision_row(st: dict, scope: str, j, k, cfg: AssumptionConfig) -> dict:
    """Repeats of one ad in slots j and k: observed O against E under the product of the slot marginals, over the
    strata of two events or more (a one-event stratum has O = E by construction)."""
    o, e, ratio = st["collisions_observed"], st["collisions_expected"], st["collision_ratio"]
    stat = None if np.isnan(ratio) else ratio
    if e < cfg.min_expected and st["n_pairs"] < cfg.min_table_n:
        return row("d.collisions", scope, stat, cfg.collision_tol, WARN,
                   f"cannot judge: expected repeats of one ad in slots {j} and {k} = {e:.2f} < {cfg.min_expected} "
                   f"and only {st['n_pairs']:.0f} of {st['n']:.0f} events are in (context, day) strata of two "
                   f"events or more (< {cfg.min_table_n}) -- {COARSER}")
    if e < cfg.min_expected:
        return row("d.collisions", scope, stat, cfg.collision_tol, PASS,
                   f"expected repeats of one ad in slots {j} and {k} = {e:.2f} < {cfg.min_expected} over "
                   f"{st['n_pairs']:.0f} events in strata of two events or more: within a context the slot pools "
                   f"(nearly) do not overlap, nothing to test")
    if abs(ratio - 1.0) > cfg.collision_tol:
        if ratio < 1.0:
            why = ("fewer than if the slots were chosen independently: the slate is sampled without replacement "
                   "(ranked layout), not factorized")
        else:
            why = (f"more than if the slots were chosen independently: slot {k} tends to repeat slot {j}'s ad "
                   f"(the slots are chosen together, or on a context the (context_id, day) strata do not hold), "
                   f"not factorized")
        return row("d.collisions", scope, ratio, cfg.collision_tol, FAIL,
                   f"{o:.0f} events show the same ad in slots {j} and {k}, {e:.1f} expected, O/E={ratio:.2f}: "
                   f"{why}; PI/PI++ do not apply -- use IPS with the joint slate propensity")
    return row("d.collisions", scope, ratio, cfg.collision_tol, PASS,
               f"{o:.0f} repeats of one ad in slots {j},{k} vs {e:.1f} expected: consistent")
