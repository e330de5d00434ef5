"""Check c, support: the target's mass on (position, ad) pairs the event's logging policy never showed (or only
with a non-positive propensity), where importance weights are undefined (seed 002: mu_k > 0 wherever pi_k > 0)."""
from __future__ import annotations

import pandas as pd

from .verdict import FAIL, PASS, WARN, AssumptionConfig, row


def unsupported(mass: pd.DataFrame) -> pd.Series:
    """Rows of (position, ad) pairs with target mass that the events' logging policy never showed (n null or 0)
    or showed only with a logged propensity of 0 or less; shown with no logged propensity counts as shown."""
    return mass["n"].isna() | ~(mass["n"].fillna(0) > 0) | (mass["max_p"].notna() & ~(mass["max_p"] > 0))


def check_c(mass: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Unsupported target mass per target policy."""
    out = []
    for policy, g in mass.groupby("policy_id"):
        total = float(g["mass"].sum())
        # a pair is supported when it was shown; a logged propensity of 0 says it could not have been. Pairs
        # shown with no logged propensity (propensity-free logs) are shown, hence supported: the IPS/PI family
        # says "needs propensities" itself (estimators/slate_family.slate_rows), and scavenging/factored need none
        unsup = unsupported(g)
        share = float(g.loc[unsup, "mass"].sum()) / total if total > 0 else 0.0
        worst_pairs = (g.loc[unsup].sort_values("mass", ascending=False).head(3)
                        .apply(lambda r: f"({r['position']}, {r['ad_id']})", axis=1).tolist())
        verdict = FAIL if share > cfg.support_max else (WARN if share > 0 else PASS)
        msg = f"{share:.4%} of the target's mass is on (position, ad) pairs its events' logging policy never showed"
        if verdict != PASS:
            msg += (f", e.g. {', '.join(worst_pairs)}; importance weights are undefined there: IPS/PI/PI++ refuse "
                    f"(or mark) this estimate -- restrict the target to logged ads or log with more exploration")
        out.append(row("c.support", f"policy={policy}", share, cfg.support_max, verdict, msg))
    return out
