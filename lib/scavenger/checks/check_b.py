"""Check b, enough exploration (seed 001 Theorem 3: the bound grows as 1/sqrt(T_a)): T_a (impressions of ad a at
any position) and M(a, i) per (ad, position) against minimums; the share of each target policy's mass on
(position, ad) pairs observed fewer than min_m times."""
from __future__ import annotations

import pandas as pd

from .verdict import FAIL, PASS, WARN, AssumptionConfig, row


def check_b(slot: pd.DataFrame, mass: pd.DataFrame | None, cfg: AssumptionConfig) -> list[dict]:
    """Exploration minimums T_a, M(a, i); target mass on rarely observed (position, ad)."""
    out = []
    if slot.empty:
        return [row("b.exploration", "all", 0, cfg.min_t, FAIL, "no clean impressions in the window")]
    t_a = slot.groupby("ad_id")["n"].sum()
    low = int((t_a < cfg.min_t).sum())
    out.append(row("b.exploration_T", "all", float(t_a.min()), cfg.min_t, WARN if low else PASS,
                   f"T_a: {len(t_a)} ads, min {int(t_a.min())}, median {float(t_a.median()):.0f}; {low} ads below "
                   f"{cfg.min_t} impressions" + ("; their estimates rest on few events (seed 001 Theorem 3 bound "
                                                 "grows as 1/sqrt(T_a))" if low else "")))
    m = slot.groupby(["position", "ad_id"])["n"].sum().reset_index()
    for pos, g in m.groupby("position"):
        low = int((g["n"] < cfg.min_m).sum())
        out.append(row("b.exploration_M", f"position={pos}", float(g["n"].min()), cfg.min_m, WARN if low else PASS,
                       f"M(a,{pos}): {len(g)} ads shown, min {int(g['n'].min())}; {low} below {cfg.min_m}"
                       + ("; ADC weights of those ads are noisy" if low else "")))
    if mass is not None and not mass.empty:
        out += _rare_mass_rows(m, mass, cfg)
    return out


def _rare_mass_rows(m: pd.DataFrame, mass: pd.DataFrame, cfg: AssumptionConfig) -> list[dict]:
    """Per target policy: the share of its mass on (position, ad) pairs logged fewer than min_m times (M pooled
    over the logging policies)."""
    out = []
    pooled = m.rename(columns={"n": "m_pooled"})
    mm = mass.merge(pooled, on=["position", "ad_id"], how="left")
    mm["m_pooled"] = mm["m_pooled"].fillna(0)
    for policy, g in mm.groupby("policy_id"):
        total = float(g["mass"].sum())
        rare = float(g.loc[g["m_pooled"] < cfg.min_m, "mass"].sum())
        share = rare / total if total > 0 else 0.0
        verdict = FAIL if share > cfg.rare_mass_max else (WARN if share > 0 else PASS)
        out.append(row("b.rare_mass", f"policy={policy}", share, cfg.rare_mass_max, verdict,
                       f"{share:.4%} of the target's mass is on (position, ad) pairs logged fewer than "
                       f"{cfg.min_m} times" + ("; its estimate leans on a handful of events: collect more "
                                              "exploration or restrict the target" if verdict != PASS else "")))
    return out
