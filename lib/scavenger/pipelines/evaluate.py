"""``scavenger evaluate``: every target policy of the decisions over a window, every applicable estimator.

plan (registry) -> gated window (one pass per new day) -> estimators left by the gate -> estimates, or "not
identified: why" -> by-day estimates from the same per-day statistics (``by_day``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import registry
from ..checks import assumptions as A
from ..errors import DataCheckFailed, UsageError
from ..estimators.declaration import EstimateOptions
from ..estimators.rows import not_identified
from .common import GateConfig, Inputs, Window, counted, require_clean_rows, run_window
from .names import check_policy_names
from .derived import derived_policies
from . import running as R, window_pool
from .by_day import by_day_job
from .diagnostics import diagnostics as _diagnostics
from .estimate_rows import run_estimators
from .target_gate import PolicyVerdicts, gate_rows


@dataclass
class EvaluateOptions:
    estimators: list | None = None         # None: the default set (registry)
    adc: str = "estimate"                  # "estimate" (from the window) or a stored ADC table
    adc_method: str = "heuristic"             # issue 30: cross-fitted variance_optimal was never more precise
    delta: float = 0.05                    # Theorem 3/4 bounds hold with probability 1 - delta
    level: float = 0.95
    uniform_logging: bool = False
    prior_mean: float | None = None
    n_ads: int | None = None
    reorder: list = field(default_factory=list)
    policies: list | None = None
    dcg_base: float = 2.0
    by_day: bool = False
    reward_bounds: tuple | None = None     # a slot reward's declared [min, max]; None: the gate's rules (evaluate)
    baseline: str | None = None            # --baseline: a target of the decisions, or "logging" (pipelines/running.py)

    def wanted(self) -> list[str]:
        return registry.resolve(self.estimators)


@dataclass
class Evaluation:
    estimates: pd.DataFrame
    diagnostics: pd.DataFrame
    adc: pd.DataFrame | None
    window: Window
    estimates_by_day: pd.DataFrame | None = None
    notes: list = field(default_factory=list)
    refused: list = field(default_factory=list)    # named estimators the data or the gate could not support
    warnings: list = field(default_factory=list)   # estimates that left more than 1% of the rows unused
    differences: pd.DataFrame | None = None        # --baseline: target minus baseline (pipelines/running.py)
    running: pd.DataFrame | None = None            # --by-day: each estimate over the first day through dt

    @property
    def stats(self):
        return self.window.stats

    @property
    def verdicts(self) -> list:
        return self.window.verdicts


def _gate_estimators(wanted: list, named: bool, window: Window, gate: GateConfig,
                     verdicts: PolicyVerdicts | None = None, policies=()) -> tuple[list, list, list]:
    """(estimators to run, notes, refused): a failed check refuses a named estimator (enforce) or leaves a default
    one out with a note; ``report`` keeps it, marked by its checks column. One note per set of failed checks.
    A check that fails for some target policies only (TARGET_CHECKS) does not stop the estimator: the estimates
    of those targets are refused row by row (:func:`gate_rows`)."""
    keep, refused, grouped = [], [], {}
    for e in wanted:
        if verdicts is None or gate.mode != "enforce":     # report/off keep every estimator: note any failure
            failed = tuple(c for c in registry.get(e).checks if window.check_verdicts.get(c) == A.FAIL)
        else:
            failed = tuple(c for c in registry.get(e).checks if verdicts.failed_everywhere(c, list(policies)))
        if not failed or gate.mode != "enforce":
            keep.append(e)
            if failed:
                grouped.setdefault((failed, "estimates marked (--gate report)"), []).append(e)
            continue
        if named:
            refused.append(f"{e}: check(s) {','.join(failed)} failed "
                           f"({', '.join(A.CHECK_NAMES[c] for c in failed)})")
        else:
            grouped.setdefault((failed, "left out of the default set"), []).append(e)
    notes = [f"{', '.join(es)}: check(s) {','.join(f)} failed ({', '.join(A.CHECK_NAMES[c] for c in f)}); {what}"
             for (f, what), es in grouped.items()]
    return keep, notes, refused


def estimate_window(stats, policies: list, run: list, options: EstimateOptions) -> list[dict]:
    """Rows of every estimator in ``run`` for every policy (the window, or one day of it): the registry's
    declarations, run by pipelines/estimate_rows.py."""
    return run_estimators(stats, policies, run, options)


def _policies(stats, options: EvaluateOptions) -> list:
    pe = stats.table("policy_events")
    have = sorted(pe["policy_id"].unique()) if len(pe) else []
    if options.policies:
        missing = [p for p in options.policies if p not in have]
        if missing and not have:
            raise DataCheckFailed(f"no decisions of the policies {', '.join(missing)} in the window")
        return [p for p in have if p in options.policies or p.startswith("reorder_")]
    return have


def _unseen_policies(stats, policies: list, run: list, options: EvaluateOptions) -> list[dict]:
    """A policy of the decisions (or one --policies names) none of whose decisions falls on a clean logged event
    (every event it decides was quarantined, or it decides none) while others' do: a row per estimator that says
    so, not a policy silently missing from the output. Only a policy --policies names makes a job that asked for an
    estimator by name fail (exit 3); the others' rows were quarantined, which the quarantine check judges."""
    read = stats.table("decision_policies")
    rows = read.groupby("policy_id")["rows"].sum() if len(read) else pd.Series(dtype="int64")
    names = list(options.policies or []) or sorted(str(p) for p in rows.index)
    out = []
    for p in names:
        if p in policies:
            continue
        why = ("none of its decision rows falls on a clean logged event of the window (each was quarantined, or "
               "its event was: see quarantine/)" if int(rows.get(p, 0)) else "no decision of this policy in the "
                                                                             "window")
        out += [not_identified(p, e, why, 0, options.level) for e in run]
    return out


def finish(rows: list, window_name: str, window: Window, level: float, verdicts: PolicyVerdicts | None = None,
           enforce: bool = False) -> pd.DataFrame:
    """The estimates table: columns of the registry, checks (as each target sees them: ``verdicts``), window, and
    the recommended estimate per policy; with ``enforce``, a target's estimates whose own check failed are refused
    (:func:`gate_rows`)."""
    est = pd.DataFrame(rows, columns=list(registry.ESTIMATE_COLUMNS))
    est["window"] = window_name
    est["level"] = est["level"].fillna(level)
    if verdicts is None:
        est["checks"] = [" ".join(f"{c}:{window.check_verdicts.get(c, 'not_run')}"
                                  for c in registry.get(_base_name(e)).checks)
                         or "not_run" for e in est["estimator"]]
    else:
        est["checks"] = [" ".join(f"{c}:{verdicts.verdict(p, c)}" for c in registry.get(_base_name(e)).checks)
                         or "not_run" for p, e in zip(est["policy_id"], est["estimator"])]
        if enforce and len(est):
            est = gate_rows(est, verdicts)
    est["recommended"] = _recommended(est)
    return est


def _recommended(est: pd.DataFrame) -> np.ndarray:
    """Per policy, the row to read first among those identified with a finite interval (no bound): an estimate
    whose checks all passed first, then the registry's order (PI++, PI, IPS, factored, ...); the first such row
    where two tie."""
    ok = (est["identified"].eq(True).to_numpy() & np.isfinite(est["ci_low"].to_numpy(dtype=float))
          & np.isfinite(est["ci_high"].to_numpy(dtype=float)) & (est["interval_kind"] != "bound").to_numpy())
    best: dict = {}
    for i, (p, e, c) in enumerate(zip(est["policy_id"], est["estimator"], est["checks"])):
        if ok[i] and p is not None and p == p:
            rank = (":fail" in str(c), registry.get(_base_name(e)).recommend_rank)
            if p not in best or rank < best[p][0]:
                best[p] = (rank, i)
    out = np.zeros(len(est), dtype=bool)
    out[[i for _, i in best.values()]] = True
    return out


def _base_name(e: str) -> str:
    return registry.base_of(e)


def evaluate(engine, inputs: Inputs, options: EvaluateOptions, gate: GateConfig, config=None, store=None,
             quarantine_dir=None, run_id: str = "adhoc", batch_days: int | None = None) -> Evaluation:
    """See the module docstring."""
    from ..statistics.scan import StatsConfig

    if inputs.decisions is None and not options.reorder:
        raise UsageError("evaluate needs --decisions or at least one --reorder policy")
    if options.reward_bounds is None:       # the intervals' and bounds' reward range: the declared one
        options = dataclasses.replace(options, reward_bounds=(gate.rules.reward_min, gate.rules.reward_max))
    wanted = options.wanted()
    checks = registry.checks_for(wanted)
    config = config or StatsConfig(rules=gate.rules, policies=tuple(inputs.policies) if inputs.policies else None)
    pair = options.baseline not in (None, "logging")      # --baseline naming a target: its pair moments are made
    if pair:
        config = dataclasses.replace(config, baseline=options.baseline)
    derived, spec = derived_policies(engine, inputs, options, gate, config, store, batch_days)
    spec = {"derived": spec, "baseline": options.baseline} if pair else spec
    plan = registry.plan_for(wanted, checks, adcs_given=options.adc not in (None, "", "estimate"))
    window = run_window(engine, inputs, checks, plan, gate, config, store,
                        quarantine_dir, run_id, batch_days, decisions_key=spec, derived=derived)
    with counted(window):
        require_clean_rows(window, "policy value")
        stats = window.stats
        pe = stats.table("policy_events")
        check_policy_names(engine, inputs, options.policies, pe["policy_id"].unique() if len(pe) else [],
                           stats.dates)          # a misspelled --policies: exit 2, did you mean
        policies = _policies(stats, options)
        verdicts = PolicyVerdicts.of_window(window)
        run, notes, refused = _gate_estimators(wanted, bool(options.estimators), window, gate, verdicts, policies)
        if refused:
            msgs = [f"{r['check']} [{r['scope']}]: {r['message']}" for r in window.verdicts if r["verdict"] == A.FAIL]
            raise DataCheckFailed("refusing to write estimates whose assumptions failed: " + "; ".join(refused)
                                  + (" -- " + " | ".join(msgs[:5]) if msgs else ""), verdicts=window.verdicts)
        if not run:
            raise DataCheckFailed("no estimator left to run: " + "; ".join(notes), verdicts=window.verdicts)
        names = [r["policy_id"] for r in options.reorder]
        opts = EstimateOptions(options, stats.window, derived=names, named=_named(options.estimators))
        R.check_baseline(options.baseline, stats)
        windows = _by_day_windows(stats, policies, run, opts, options, window, lambda rows, name: finish(
            rows, name, window, opts.level, verdicts, gate.enforce))       # under way while the window's run
        try:
            return _evaluated(stats, policies, run, opts, options, window, verdicts, gate, notes, windows)
        finally:
            if windows is not None:
                windows[0].close()


def _evaluated(stats, policies, run, opts, options: EvaluateOptions, window, verdicts, gate, notes, windows):
    """evaluate's tables of the window (the by-day windows already started: :func:`_by_day_windows`)."""
    unseen = _unseen_policies(stats, policies, run, options)
    est = finish(estimate_window(stats, policies, run, opts) + unseen, stats.window, window, options.level,
                 verdicts, gate.enforce)
    quiet = set() if options.policies else {r["policy_id"] for r in unseen}
    diag = _diagnostics(stats, policies, opts.side["diagnostics"], notes)
    warnings, unused_diag = unused_rows(est)
    if unused_diag:
        diag = pd.concat([diag, pd.DataFrame(unused_diag, columns=list(diag.columns)).astype(diag.dtypes)],
                         ignore_index=True)
    diffs = R.differences(stats, policies, run, opts, options.baseline)
    by_day, running = (None, None) if windows is None else [
        done(rows) for done, rows in zip(windows[1], windows[0].results())]
    named = _named(options.estimators)
    refused = [f"{r['estimator']} ({r['policy_id']}): {r['reason']}" for r in est.to_dict("records")
               if not r["identified"] and _base_name(r["estimator"]) in named and r["policy_id"] not in quiet]
    return Evaluation(estimates=est, diagnostics=diag, adc=opts.side.get("adc"), window=window,
                      estimates_by_day=by_day,
                      notes=notes + [f"{r['estimator']} ({r['policy_id']}) not identified: {r['reason']}"
                                     for r in est.to_dict("records") if not r["identified"]], refused=refused,
                      warnings=warnings, differences=diffs, running=running)


UNUSED_WARN_SHARE = 0.01   # an estimate that leaves more than this share of its policy's rows unused is flagged


def unused_rows(est: pd.DataFrame, threshold: float = UNUSED_WARN_SHARE) -> tuple[list, list]:
    """(warnings, diagnostic rows) for the identified estimates that used fewer than all their policy's rows
    (n_events used, n_unused left out, unused_reasons why): a diagnostic ``unused_share:<estimator>`` per such
    estimate, and one warning per (policy, rows used, reasons) when more than ``threshold`` of the rows went
    unused."""
    warnings, diag, grouped = [], [], {}
    for r in est.to_dict("records"):
        used = int(r.get("n_events") or 0)
        unused = int(r.get("n_unused") or 0) if pd.notna(r.get("n_unused")) else 0
        if not r.get("identified") or unused <= 0 or used + unused == 0:
            continue
        share = unused / (used + unused)
        if share <= threshold:
            continue
        diag.append({"policy_id": r["policy_id"], "metric": f"unused_share:{r['estimator']}", "slot": None,
                     "value": float(share)})
        key = (r["policy_id"], used, unused, r.get("unused_reasons") or "not given")
        grouped.setdefault(key, []).append(r["estimator"])
    for (policy, used, unused, reasons), ests in grouped.items():
        total = used + unused
        warnings.append(f"{', '.join(ests)} ({policy}): used {used:,} of {total:,} rows; {unused:,} "
                        f"({unused / total:.1%}) left out ({reasons})")
    return warnings, diag


def _named(estimators) -> set:
    """Estimators the user named one by one (a group such as ``scavenging`` or ``slate`` names none): one of
    them that the data cannot identify makes the run exit 3; the others are left with their reason."""
    out = set()
    for e in estimators or []:
        if e.strip() and not registry.is_group(e.strip()):
            out.add(registry.get(e.strip()).name)
    return out


def _by_day_windows(stats, policies, run, opts: EstimateOptions, options: EvaluateOptions, window, finish_day):
    """--by-day's estimates_by_day and running/ started together (pipelines/window_pool.start: forked workers
    compute them while this process runs the window's own estimators): (the started jobs, each table's assemble
    from its results), or None without --by-day."""
    if not options.by_day:
        return None
    jobs = [by_day_job(stats, policies, run, opts, window, finish_day),
            R.running_job(stats, policies, run, opts, options.baseline, window.absent)]
    workers = window_pool.worker_count(stats.engine, sum(len(job.items) for job, _ in jobs))
    return window_pool.start(stats, [job for job, _ in jobs], workers), [done for _, done in jobs]
