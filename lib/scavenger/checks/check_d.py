"""Check d, factorized logging (seed 002 section 2: mu(A|X) = prod_k mu_k(A_k|X)): within context strata, slot j's
ad vs slot k's ad -- a pooled bias-corrected Cramer's V, and a collision test: the number of events showing the
same ad in both slots against its expectation under the product of the slot marginals (a ranked layout samples
without replacement, so it never repeats an ad although the marginals overlap)."""
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
        if st["n"] < cfg.min_table_n:
            verdict = WARN
            msg = f"only {st['n']:.0f} events: cannot judge slot independence"
        elif st["v_pooled"] > cfg.factor_v_max:
            verdict = FAIL
            msg = (f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata (chi2={st['chi2']:.1f}, "
                   f"dof={st['dof']:.0f}): slot {k}'s ad depends on slot {j}'s given the context, so the logging "
                   f"policy does not factorize and PI/PI++ are biased (seed 002); use IPS with the joint propensity")
        else:
            verdict = PASS
            msg = f"within-context V={st['v_pooled']:.4f} over {st['strata']} strata: no material dependence"
        out.append(row("d.slot_dependence", scope, st["v_pooled"], cfg.factor_v_max, verdict, msg))
        out.append(_collision_row(st, scope, j, k, cfg))
    return out


def _collision_row(st: dict, scope: str, j, k, cfg: AssumptionConfig) -> dict:
    """Repeats of one ad in slots j and k: observed O against E under the product of the slot marginals."""
    o, e, ratio = st["collisions_observed"], st["collisions_expected"], st["collision_ratio"]
    if e < cfg.min_expected:
        return row("d.collisions", scope, None if np.isnan(ratio) else ratio, cfg.collision_tol, PASS,
                   f"expected repeats of one ad in slots {j} and {k} = {e:.2f} < {cfg.min_expected}: the "
                   f"slot pools (nearly) do not overlap, nothing to test")
    if abs(ratio - 1.0) > cfg.collision_tol:
        return row("d.collisions", scope, ratio, cfg.collision_tol, FAIL,
                   f"{o:.0f} events show the same ad in slots {j} and {k}, {e:.1f} expected if the slots were "
                   f"chosen independently: the slate is sampled without replacement (ranked layout), not "
                   f"factorized; PI/PI++ do not apply -- use IPS with the joint slate propensity")
    return row("d.collisions", scope, ratio, cfg.collision_tol, PASS,
               f"{o:.0f} repeats of one ad in slots {j},{k} vs {e:.1f} expected: consistent")
