"""The demo: a week of generated logs with known ground truth, every estimator, a readable summary.

Two data sets, because the estimators need different logging:
- ranked slates (one pool of ads, K positions) logged by a history-dependent epsilon-greedy ranking: ADCs
  (seed 001 section 4) and the scavenging/factored estimators of the generated target policies;
- slotted slates (a pool per slot, factorized uniform logging): slate IPS, PI, wPI, PI++ and the data-driven
  control variates (seed 002).
Every estimate is printed beside the generator's true value.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from . import api
from .io import fs
from .io.outputs import write_table
from .simulation.generator import GeneratorConfig, generate


def _identified(row) -> bool:
    return not ("identified" in row and row["identified"] is False or str(row.get("identified")) == "False")


def _fmt_interval(row, column: str = "value") -> str:
    if not _identified(row):
        return f"not identified: {str(row.get('reason') or '')[:90]}"
    if pd.isna(row[column]):
        return "undefined"
    if pd.isna(row["ci_low"]):
        return f"{row[column]:.4f}"
    return f"{row[column]:.4f} [{row['ci_low']:.4f}, {row['ci_high']:.4f}]"


def adc_summary(adc: pd.DataFrame, true_adc: list[float]) -> pd.DataFrame:
    """One row per position: truth, DCG and each method's coefficient with its interval."""
    wide = {}
    for method, sub in adc.groupby("method"):
        sub = sub.set_index("position")
        wide[method] = sub.apply(_fmt_interval, axis=1, column="coefficient")
        if "dcg" in sub.columns and "dcg" not in wide:
            wide["dcg"] = sub["dcg"].round(4)
    table = pd.DataFrame(wide)
    order = [c for c in ("dcg", "naive", "uniform", "heuristic", "variance_optimal") if c in table.columns]
    table = table[order + [c for c in table.columns if c not in order]]
    table.insert(0, "true", pd.Series({i + 1: c for i, c in enumerate(true_adc)}).round(4))
    table.index.name = "position"
    return table


def estimates_summary(estimates: pd.DataFrame, truth: dict) -> pd.DataFrame:
    """Policy x estimator: estimate [ci] and whether the interval covers the realized true value."""
    rows = []
    for _, r in estimates.iterrows():
        true_value = truth["policies"].get(r["policy_id"], {}).get("realized_value")
        finite = not pd.isna(r["ci_low"]) and np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"])
        # an interval that cannot fail ([-inf, inf], undefined) is not counted as covering
        covered = None if true_value is None or not finite else bool(r["ci_low"] <= true_value <= r["ci_high"])
        rows.append({"policy": r["policy_id"], "estimator": r["estimator"],
                     "true value": None if true_value is None else round(true_value, 4),
                     "estimate [interval]": _fmt_interval(r), "kind": r["interval_kind"],
                     "covers truth": covered,
                     # a share beside an estimate the data cannot identify would read as its support: left blank
                     "supported": None if pd.isna(r.get("supported_share")) or not _identified(r) else
                     round(float(r["supported_share"]), 3)})
    return pd.DataFrame(rows)


def verdict_lines(verdicts: list[dict]) -> list[str]:
    """One line per check: the worst verdict over its scopes and the message of the worst one."""
    order = {"fail": 0, "warn": 1, "pass": 2}
    worst: dict = {}
    for v in verdicts:
        check = str(v.get("check", "")).split(".")[0]
        if check not in worst or order.get(v.get("verdict"), 3) < order.get(worst[check].get("verdict"), 3):
            worst[check] = v
    return [f"   {c:<24} {v.get('verdict', '?'):<5} {str(v.get('message', ''))[:150]}" for c, v in sorted(worst.items())]


def coverage(est: pd.DataFrame, truth: dict) -> dict:
    """How many identified estimates with a finite interval cover the realized true value (the others are not
    counted: an interval that cannot fail, or none, says nothing of coverage), at which level, and which missed."""
    table = estimates_summary(est, truth)
    known = table[table["covers truth"].notna()]
    level = float(est["level"].dropna().iloc[0]) if "level" in est.columns and est["level"].notna().any() else 0.95
    missed = known[~known["covers truth"].astype(bool)]
    return {"intervals": int(len(known)), "covering": int(known["covers truth"].astype(bool).sum()),
            "not_counted": int(len(table) - len(known)), "level": level,
            "missed": [f"{p} {e}" for p, e in zip(missed["policy"], missed["estimator"])]}


def miss_statement(n: int, misses: int, level: float) -> str:
    """What ``misses`` of ``n`` intervals at ``level`` mean: were each an exact, independent level interval, the
    misses would be Binomial(n, 1 - level): the range within chance (the smallest m with P(X <= m) >= 95%), the
    probability of more, and of as many as seen."""
    from scipy.stats import binom

    q = 1.0 - level
    m = next(k for k in range(n + 1) if binom.cdf(k, n, q) >= 0.95)
    seen = f"; {misses} here, P({misses} or more) = {binom.sf(misses - 1, n, q):.1%}" if misses > m else \
        f"; {misses} here"
    return (f"exact independent {level:.0%} intervals miss Binomial({n}, {q:.2f}) times: 0-{m} misses are within "
            f"chance (P({m + 1} or more) = {binom.sf(m, n, q):.1%}){seen}")


def coverage_lines(ranked: dict, slotted: dict) -> list[str]:
    """The coverage summary: finite intervals only, the binomial reading of the misses, and which missed."""
    level = slotted.get("level", 0.95)
    lines = [f"== {ranked['covering']}/{ranked['intervals']} ranked and {slotted['covering']}/{slotted['intervals']} "
             f"slotted intervals cover the true value ({level:.0%} nominal; counted: identified estimates with a "
             f"finite interval, {ranked['not_counted'] + slotted['not_counted']} others not)"]
    for name, cov in (("ranked", ranked), ("slotted", slotted)):
        if cov["intervals"]:
            lines.append(f"   {name}: " + miss_statement(cov["intervals"], cov["intervals"] - cov["covering"],
                                                          cov["level"]))
        if cov["missed"]:
            lines.append(f"   {name} misses: {', '.join(cov['missed'])}")
    lines.append("   The estimators of one policy read the same events, so their misses come together (one "
                 "unlucky sample moves them all): the count varies more than the binomial says.")
    return lines


def run_demo(spark, out_dir: str, days: int = 7, events_per_day: int = 50_000, seed: int = 0,
             printer=print, engine: str = "duckdb") -> dict:
    """Generate both data sets and evaluate them on ``engine`` (duckdb: no JVM, ``spark`` unused and may be None;
    spark: this session, or one from the environment), write tables under ``out_dir``, print the summary.
    Estimates not identified from these logs are printed with their reason, never as numbers."""
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    summary: dict = {}
    generator = (spark or "spark") if engine == "spark" else "duckdb"

    ranked_dir = fs.join(out_dir, "ranked")
    ranked_cfg = GeneratorConfig(layout="ranked", logging="history", n_positions=4, n_ads=40, n_contexts=24,
                                 days=days, events_per_day=events_per_day, seed=seed)
    printer(f"== generating {days} days x {events_per_day:,} ranked slates (history-dependent logging) ...")
    ranked_truth = generate(generator, ranked_cfg, ranked_dir)
    ranked = api.evaluate(fs.join(ranked_dir, "logs"), fs.join(ranked_dir, "decisions"),
                          estimators=["scavenging", "factored"], gate="report", engine=engine,
                          stats_dir=fs.join(out_dir, "stats", "ranked"))
    printer("\n== data gate on the ranked logs (checks the scavenging/factored/ADC estimators rely on)")
    for line in verdict_lines(ranked.verdicts):
        printer(line)
    adc_table = ranked.adc_pandas if ranked.adc_pandas is not None else \
        api.adc(fs.join(ranked_dir, "logs"), gate="off", engine=engine).pandas
    write_table(adc_table, fs.join(out_dir, "adc"))
    printer("\n== attention-decay coefficients (seed 001 section 4), 95% intervals; DCG = 1/log2(1+i)")
    printer(adc_summary(adc_table, ranked_truth["adc"]).to_string())
    printer("   naive is biased low here: the logging ranking puts better ads higher.")
    write_table(ranked.pandas, fs.join(out_dir, "estimates_ranked"))
    printer("\n== ranked target policies: scavenging and factored estimators vs truth")
    printer(estimates_summary(ranked.pandas, ranked_truth).to_string(index=False))
    printer(f"   logging policy's true value: {ranked_truth['logging_policy']['realized_value']:.4f}")

    slotted_dir = fs.join(out_dir, "slotted")
    slotted_cfg = GeneratorConfig(layout="slotted", logging="uniform", n_positions=3, slot_sizes=[3, 10, 30],
                                  n_contexts=24, days=days, events_per_day=events_per_day, seed=seed + 1)
    printer(f"\n== generating {days} days x {events_per_day:,} slotted slates (factorized uniform logging) ...")
    slotted_truth = generate(generator, slotted_cfg, slotted_dir)
    slotted = api.evaluate(fs.join(slotted_dir, "logs"), fs.join(slotted_dir, "decisions"),
                           estimators=["slate"], gate="report", engine=engine,
                           stats_dir=fs.join(out_dir, "stats", "slotted"))
    printer("\n== data gate on the slotted logs (checks the importance-weighted estimators rely on)")
    for line in verdict_lines(slotted.verdicts):
        printer(line)
    write_table(slotted.pandas, fs.join(out_dir, "estimates_slotted"))
    write_table(slotted.diagnostics_pandas, fs.join(out_dir, "diagnostics_slotted"))
    printer("\n== slotted target policies: slate IPS, PI, wPI, PI++, data-driven CV (seed 002) vs truth")
    printer(estimates_summary(slotted.pandas, slotted_truth).to_string(index=False))

    summary["ranked"] = {"truth": ranked_truth["policies"], "coverage": coverage(ranked.pandas, ranked_truth)}
    summary["slotted"] = {"truth": slotted_truth["policies"],
                          "coverage": coverage(slotted.pandas, slotted_truth)}
    printer("")
    for line in coverage_lines(summary["ranked"]["coverage"], summary["slotted"]["coverage"]):
        printer(line)
    printer(f"   tables: {out_dir}/adc, estimates_ranked, estimates_slotted, diagnostics_slotted; "
            f"logs under {ranked_dir} and {slotted_dir}")
    fs.write_json(fs.join(out_dir, "demo_summary.json"), json.loads(json.dumps(summary, default=float)))
    return summary
