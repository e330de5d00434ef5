"""``scavenger adc``: attention-decay coefficients by position over a window (seed 001 section 4.3), with the
positions the data cannot identify said so instead of numbered; ``by_day`` adds one table per day."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..estimators import adc_family as E
from .. import registry
from ..checks import assumptions as A
from ..errors import DataCheckFailed
from .common import (GateConfig, Inputs, Window, by_day_dates, concat_days, counted, empty_day_reason,
                     require_clean_rows, run_window)


@dataclass
class AdcOptions:
    methods: tuple = ("naive", "uniform", "heuristic", "variance_optimal")
    level: float = 0.95
    dcg_base: float = 2.0
    smoothing: float = 10.0                  # pseudo-impressions of the cross-fitted variance_optimal weights
    bootstrap: int = 0
    seed: int = 0
    by_day: bool = False

    def __post_init__(self):
        """Exit 2 for a DCG base or a smoothing that would write NaN or infinite columns (the CLI and the API)."""
        import math

        from ..errors import UsageError

        if not (math.isfinite(self.dcg_base) and self.dcg_base > 1):
            raise UsageError(f"--dcg-base must be a finite number > 1, got {self.dcg_base}")
        if not (math.isfinite(self.smoothing) and self.smoothing >= 0):
            raise UsageError(f"--smoothing must be a finite number >= 0, got {self.smoothing}")
        if not 0 < self.level < 1:
            raise UsageError(f"--level must be in (0, 1), got {self.level}")


@dataclass
class AdcResult:
    table: pd.DataFrame
    window: Window
    by_day: pd.DataFrame | None = None
    refused: list | None = None

    @property
    def stats(self):
        return self.window.stats


def adc(engine, inputs: Inputs, options: AdcOptions, gate: GateConfig, store=None, quarantine_dir=None,
        run_id: str = "adhoc", batch_days: int | None = None) -> AdcResult:
    """Gate (checks a, b) -> ADC table; exit 3 (DataCheckFailed) when an assumption fails under enforce."""
    from ..statistics.scan import ScanPlan, StatsConfig

    checks = registry.checks_for(["adc"])
    config = StatsConfig(bootstrap=options.bootstrap, seed=options.seed, rules=gate.rules)
    plan = ScanPlan(slate_targets=False, context_cells="a" in checks, pair_strata=False,
                    interaction_cells="f" in checks)
    window = run_window(engine, inputs, checks, plan, gate, config, store, quarantine_dir, run_id, batch_days)
    with counted(window):
        require_clean_rows(window, "ADC")
        failed = [c for c in checks if window.check_verdicts.get(c) == A.FAIL]
        if failed and gate.enforce:
            msgs = [r["message"] for r in window.verdicts if r["verdict"] == A.FAIL]
            raise DataCheckFailed(f"refusing to write ADCs: check(s) {','.join(failed)} failed -- "
                                  + " | ".join(msgs[:5]), verdicts=window.verdicts)
        stats = window.stats
        if not len(stats.table("ad_position")):
            raise DataCheckFailed("no clean impressions in the window: cannot estimate ADCs", verdicts=window.verdicts)
        table = _checked(E.adc_rows(stats, options.methods, options.level, options.dcg_base, options.smoothing), window)
        by_day = None
        if options.by_day:
            frames = []
            for d in by_day_dates(window):
                why = empty_day_reason(None if d in window.absent else stats.day(d), d, window.absent)
                rows = _nothing(table, why) if why else _checked(
                    E.adc_rows(stats.day(d), options.methods, options.level, options.dcg_base, options.smoothing),
                    window)
                frames.append(rows.assign(dt=d))
            by_day = concat_days(frames)
        why = refusal(table, options.bootstrap)
        return AdcResult(table=table, window=window, by_day=by_day, refused=[why] if why else None)


def refusal(table: pd.DataFrame, bootstrap: int = 0) -> str | None:
    """Why the window gives no ADC past position 1 (every position > 1 not identified, with the table's reasons),
    else None: ``scavenger adc`` exits 3 with it and ``scavenger.adc`` raises it (DataCheckFailed), after the
    table is made."""
    t = table[table["interval_kind"] == ("bootstrap" if bootstrap else "delta")]
    reasons = sorted({str(x) for x in t.loc[~t["identified"].astype(bool), "reason"].dropna()})
    if not reasons or not len(t) or t.loc[t["position"] > 1, "identified"].astype(bool).any():
        return None
    return "; ".join(reasons) + (" (slotted logs show each ad at one position only: estimate ADCs from ranked "
                                 "logs, or where ads move between positions)")


def _nothing(table: pd.DataFrame, why: str) -> pd.DataFrame:
    """The window's (method, position) rows for a day with nothing to estimate: no coefficient, and why."""
    return table.assign(coefficient=float("nan"), std_error=float("nan"), ci_low=float("nan"), ci_high=float("nan"),
                        ads_used=0, impressions_used=0, identified=False, reason=why)


def _checked(table: pd.DataFrame, window: Window) -> pd.DataFrame:
    table["checks"] = " ".join(f"{c}:{window.check_verdicts.get(c, 'not_run')}" for c in registry.ADC.checks)
    return table
