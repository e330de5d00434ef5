"""``scavenger validate``: the gate alone, for the estimators a deployment runs (or the checks asked for):
quarantine with reasons, checks a-f over the window's statistics, great-expectations suites and Data Docs."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .. import registry
from ..checks import assumptions as A
from .common import GateConfig, Inputs, Window, quarantine_messages, run_window


@dataclass
class Validation:
    window: Window
    checks: tuple
    estimators: list
    failed: list
    message: str
    ge_rows: list
    not_applicable: list = field(default_factory=list)   # notes: default-set estimators a failed check rules out

    @property
    def verdicts(self) -> list:
        return self.window.verdicts + self.ge_rows

    def verdict_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.verdicts, columns=A.VERDICT_COLUMNS)


def checks_to_run(estimators, checks) -> tuple[list, tuple]:
    """(estimators in use, checks): explicit checks win; else the checks the estimators rely on (default set)."""
    ests = registry.resolve(estimators) + (["adc"] if estimators and "adc" in estimators else [])
    ests = [e for e in dict.fromkeys(ests)]
    if checks:
        return ests, tuple(sorted(set(checks)))
    return ests, registry.checks_for(ests)


def validate(engine, inputs: Inputs, estimators, checks, gate: GateConfig, store=None, quarantine_dir=None,
             run_id: str = "adhoc", batch_days: int | None = None, docs_dir: str | None = None,
             max_policies: int = 1000, stop_on_quarantine: bool = True) -> Validation:
    """The gate over the window. ``stop_on_quarantine`` (the notebook API): a quarantined share past the threshold
    raises DataCheckFailed from the window, before the checks' verdicts and great-expectations; False (``scavenger
    validate``): the run goes on, the quarantine is one more failed check (``failed``), and the caller writes
    validation/ and data_docs/ before it exits 3."""
    from ..statistics.scan import StatsConfig

    configured = bool(estimators) or bool(checks)   # the user (or the deployment's config) named them
    ests, checks = checks_to_run(estimators, checks)
    plan = registry.plan_for([e for e in ests if e != "adc"], checks)
    config = StatsConfig(rules=gate.rules, max_policies=max_policies,
                         policies=tuple(inputs.policies) if inputs.policies else None)
    window = run_window(engine, inputs, checks, plan, gate, config, store, quarantine_dir, run_id, batch_days,
                        stop_on_quarantine=stop_on_quarantine)
    ge_rows = []
    if gate.great_expectations:
        from ..checks.ge_window import run_window_suites

        ge_rows = run_window_suites(window, inputs, gate, docs_dir)
    failed = [c for c in (*checks, "quarantine") if window.check_verdicts.get(c) == A.FAIL]
    failed, not_applicable = _default_set_failures(failed, ests, named=configured)
    counts = window.counts["logs"]
    if failed:
        message = _failed_message(window, failed, ests)
    else:
        message = (f"data checks passed for {', '.join(ests) or 'the checks asked for'}; "
                   f"{counts['rows_quarantined']} of {counts['rows_in']} log rows set aside")
    if not_applicable:
        message += "; " + "; ".join(not_applicable)
    return Validation(window, checks, ests, failed, message, ge_rows, not_applicable)


def _failed_message(window: Window, failed: list, ests: list) -> str:
    """The quarantine's own messages (as the window words them when it stops a job), then the failed checks a-f
    with the estimators they affect and their first three failed scopes."""
    parts = quarantine_messages(window.verdicts) if "quarantine" in failed else []
    checks = [c for c in failed if c != "quarantine"]
    if checks:
        first = [f"{r['check']} [{r['scope']}]: {r['message']}" for r in window.verdicts
                 if r["verdict"] == A.FAIL and r["check"].split(".")[0] in checks][:3]
        names = ", ".join(f"{c} ({A.CHECK_NAMES.get(c, c)})" for c in checks)
        affected = sorted({e for c in checks for e in registry.estimators_relying_on(c, ests)})
        parts.append(f"data checks failed: {names}" + (f" -- affects {', '.join(affected)}" if affected else "")
                     + ". " + "; ".join(first))
    return "; ".join(parts)


def _default_set_failures(failed: list, ests: list, named: bool) -> tuple[list, list]:
    """(failed checks that gate, notes). With the default set (no --estimators, no --checks: nothing configured),
    a check that bears only on the IPS/PI family (c support, d factorized logging, e calibration) rules that family
    out instead of failing the run, as ``evaluate`` leaves it out of its default set: ranked logs (not factorized)
    pass for ADC, scavenging, factored and re-ordering. Check f (reward interaction) likewise rules out the
    estimators that assume additive slots: cascade logs pass for scavenging and slate IPS. Naming one of them
    gates on the check again."""
    if named:
        return failed, []
    gate, notes = [], []
    for c in failed:
        affected = registry.estimators_relying_on(c, ests) if c != "quarantine" else []
        if affected and (c == "f" or all(registry.get(e).family == "slate" for e in affected)):
            what = "estimators assuming additive slots" if c == "f" else "PI family"
            notes.append(f"{what} not applicable ({', '.join(affected)}): check {c} failed "
                         f"({A.CHECK_NAMES.get(c, c)}); name them with --estimators to gate on it")
        else:
            gate.append(c)
    return gate, notes
