"""Orchestration of ``scavenger adc`` and ``scavenger evaluate`` (a notebook calls the same functions).

read -> statistics (one scan per missing dt, stored per dt, merged over the window) -> gate -> estimators (pure
pandas/numpy on the merged tables) -> output tables. Nothing here touches row-level data on the driver.

    from scavenger.evaluation import EvaluateOptions, evaluate, estimate_adc
    out = evaluate(spark, "gen/logs", "gen/decisions", "2026-01-01", "2026-01-03", stats_dir="stats")
    out.estimates  # policy_id, estimator, value, std_error, ci_low, ci_high, interval_kind, n_events, ...

Checks hook: ``register_gate(fn)`` adds ``fn(stage, context) -> list[verdict dict]``; ``gate`` runs them at the
stages "statistics" (context: the WindowStats) and "estimates" (context: the estimates frame). A verdict with
``{"status": "fail", "blocking": True}`` stops the job with DataCheckFailed (exit 3). No gate is registered here.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .errors import DataCheckFailed, UsageError
from .estimators import adc as adc_mod
from .estimators import factored as factored_mod
from .estimators import reordering as reorder_mod
from .estimators import scavenging as scav_mod
from .statistics.scan import StatsConfig
from .statistics.store import WindowStats, window_statistics

SLATE_ALIASES = {"ips": "slate_ips", "snips": "slate_snips", "pi": "slate_pi", "wpi": "slate_wpi",
                 "pi_plus_plus": "slate_pi_plus_plus", "pi_beta": "slate_pi_beta"}
SLATE_ESTIMATORS = tuple(SLATE_ALIASES.values())
ESTIMATORS = ("scavenging_slate", "scavenging_base", "factored", "reorder") + SLATE_ESTIMATORS

ESTIMATE_COLUMNS = ["policy_id", "estimator", "value", "std_error", "ci_low", "ci_high", "interval_kind",
                    "n_events", "supported_share", "window", "level", "unsupported_share", "n_missing_propensity",
                    "adc_source", "adc_method", "prior_mean", "prior_source", "note"]
DIAGNOSTIC_COLUMNS = ["policy_id", "metric", "slot", "value"]

# ---- checks hook ---------------------------------------------------------------------------------------------
GATES: list[Callable[[str, object], list]] = []


def register_gate(fn: Callable[[str, object], list]) -> None:
    """Add a check ``fn(stage, context) -> list of verdict dicts`` run by :func:`gate`."""
    GATES.append(fn)


def gate(stage: str, context) -> list:
    """Run the registered checks for ``stage``; raise DataCheckFailed on a blocking failure."""
    verdicts = []
    for fn in GATES:
        verdicts.extend(fn(stage, context) or [])
    failed = [v for v in verdicts if v.get("status") == "fail" and v.get("blocking", True)]
    if failed:
        raise DataCheckFailed(f"{len(failed)} blocking check(s) failed at {stage}: "
                              + "; ".join(str(v.get("name", v)) for v in failed), verdicts=verdicts)
    return verdicts


# ---- options --------------------------------------------------------------------------------------------------
@dataclass
class EvaluateOptions:
    estimators: list | None = None         # None: every applicable estimator
    adc: str = "estimate"                  # "estimate" (from the window's ad_position) or a stored ADC table path
    adc_method: str = "variance_optimal"
    delta: float = 0.05                    # Theorem 3/4 bounds hold with probability 1 - delta
    level: float = 0.95                    # CLT interval level
    uniform_logging: bool = False          # add the Theorem 4 rows (logging uniform over actions)
    prior_mean: float | None = None        # PI++ prior P' (default: logged mean reward)
    n_ads: int | None = None               # catalogue size for k in Theorem 3 (default: ads seen in the window)
    reorder: list = field(default_factory=list)  # specs of statistics.reorder.parse_reorder_specs
    policies: list | None = None
    dcg_base: float = 2.0

    def normalized_estimators(self) -> list:
        if not self.estimators:
            return list(ESTIMATORS)
        out = []
        for e in self.estimators:
            name = SLATE_ALIASES.get(e, e)
            if name == "scavenging":
                out += ["scavenging_slate", "scavenging_base"]
                continue
            if name == "slate":
                out += list(SLATE_ESTIMATORS)
                continue
            if name not in ESTIMATORS:
                raise UsageError(f"unknown estimator {e!r}; choose from {', '.join(ESTIMATORS + tuple(SLATE_ALIASES))}")
            out.append(name)
        return list(dict.fromkeys(out))


@dataclass
class Evaluation:
    estimates: pd.DataFrame
    diagnostics: pd.DataFrame
    adc: pd.DataFrame | None
    stats: WindowStats
    verdicts: list = field(default_factory=list)
    gate_counts: dict = field(default_factory=dict)   # rows in / used / quarantined per table (gate on)


# ---- ADC ------------------------------------------------------------------------------------------------------
def estimate_adc(stats: WindowStats, methods=adc_mod.METHODS, level: float = 0.95, dcg_base: float = 2.0,
                 smoothing: float = 1.0) -> pd.DataFrame:
    ap = stats.table("ad_position")
    if not len(ap):
        raise DataCheckFailed("no impressions in the window: cannot estimate ADCs")
    return adc_mod.adc_table(ap, methods, level, dcg_base, smoothing)


def adc_statistics(spark, logs: str, date_from=None, date_to=None, stats_dir: str | None = None,
                   bootstrap: int = 0, seed: int = 0, logs_df=None) -> WindowStats:
    """Logs-only statistics (no decisions) of a window; stored under ``<stats_dir>/logs_only``.
    ``logs_df``: the gate's clean rows (statistics stored apart from those of the raw rows)."""
    config = StatsConfig(bootstrap=bootstrap, seed=seed, slate_actions=False)
    sub = str(Path(stats_dir) / "logs_only") if stats_dir else None
    return window_statistics(spark, logs, None, date_from, date_to, sub, config, logs_df=logs_df,
                             rows_tag="clean" if logs_df is not None else None)


def gated_adc_statistics(spark, logs: str, date_from=None, date_to=None, stats_dir: str | None = None,
                         bootstrap: int = 0, seed: int = 0, gate_config=None):
    """(WindowStats, verdict records, ADC check verdicts) with the data gate in front: quarantine and checks a, b
    (seed 001 section 4 needs placement independent of the context). Enforcing, a failed check exits 3."""
    if gate_config is None:
        return adc_statistics(spark, logs, date_from, date_to, stats_dir, bootstrap, seed), [], {}
    result = run_window_gate(spark, logs, None, date_from, date_to, ["adc"], gate_config)
    try:
        failed = [c for c in checks_for("adc") if result.check_verdicts.get(c) == "fail"]
        if failed and gate_config.gate:
            msgs = [r["message"] for r in result.verdict_records() if r.get("verdict") == "fail"]
            raise DataCheckFailed(f"refusing to write ADCs: check(s) {','.join(failed)} failed -- "
                                  + " | ".join(msgs[:5]), verdicts=result.verdict_records())
        stats = adc_statistics(spark, logs, date_from, date_to, stats_dir, bootstrap, seed,
                               logs_df=result.clean_logs)
        stats.gate_counts = dict(result.counts)
        return stats, result.verdict_records(), {c: result.check_verdicts.get(c, "not_run")
                                                 for c in checks_for("adc")}
    finally:
        result.release()


def read_adc_table(path: str) -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"--adc: no such ADC table {path}")
    if p.is_dir() and (p / "adc").is_dir():
        p = p / "adc"
    try:
        table = pd.read_parquet(p) if p.suffix != ".csv" else pd.read_csv(p)
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"--adc: cannot read {path}: {exc}") from None
    missing = {"position", "method", "coefficient"} - set(table.columns)
    if missing:
        raise UsageError(f"--adc: table {path} lacks column(s) {sorted(missing)}")
    return table


def resolve_adc(options: EvaluateOptions, stats: WindowStats, K: int):
    """(C vector, ADC table, source) from --adc estimate|PATH."""
    if options.adc in (None, "", "estimate"):
        table = estimate_adc(stats, level=options.level, dcg_base=options.dcg_base)
        source = "estimated"
    else:
        table = read_adc_table(options.adc)
        source = str(options.adc)
    try:
        C = adc_mod.adc_vector(table, options.adc_method, K)
    except ValueError as exc:
        raise UsageError(f"--adc-method: {exc}") from None
    return C, table, source


# ---- estimates from statistics ----------------------------------------------------------------------------------
def _slate_moments_for(sm: pd.DataFrame, policy_id: str):
    from .estimators.slate import SlateMoments

    rows = sm[sm["policy_id"] == policy_id]
    total = None
    for _, row in rows.iterrows():
        K = int(len(row["s_Y"]))
        kw = {"K": K}
        for name in ("n", "n_missing_propensity", "s_r", "s_r2", "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2",
                     "n_W_pos", "max_W"):
            v = row[name]
            kw[name] = 0.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        for name in ("s_Y", "s_rY", "s_r2Y", "n_Y_pos", "max_Y"):
            kw[name] = np.nan_to_num(np.asarray(row[name], dtype=float))
        for name in ("s_YY", "s_rYY", "s_r2YY"):
            kw[name] = np.nan_to_num(np.asarray(row[name], dtype=float)).reshape(K, K)
        m = SlateMoments(**kw)
        total = m if total is None else total.add(m)
    return total


def _row(policy_id, estimator, value, se, lo, hi, kind, n, window, level, **extra):
    row = {c: None for c in ESTIMATE_COLUMNS}
    row.update({"policy_id": policy_id, "estimator": estimator, "value": value, "std_error": se, "ci_low": lo,
                "ci_high": hi, "interval_kind": kind, "n_events": n, "window": window, "level": level})
    row.update(extra)
    return row


def estimates_from_stats(stats: WindowStats, options: EvaluateOptions, adc_table: pd.DataFrame | None = None,
                         C: np.ndarray | None = None, adc_source: str | None = None):
    """(estimates, diagnostics) for every policy of the window: pure pandas/numpy on the merged tables."""
    wanted = options.normalized_estimators()
    window = stats.window
    pe = stats.table("policy_events")
    ls = stats.table("log_summary")
    n_logged = float(ls["n_events"].sum()) if len(ls) else 0.0
    K = int(ls["k_max"].max()) if len(ls) else 0
    rows, diags = [], []
    policies = [p for p in sorted(pe["policy_id"].unique()) if not options.policies or p in options.policies
                or p.startswith("reorder_")]

    for p in policies:
        rec = pe[pe["policy_id"] == p].iloc[0]
        for metric, value in (("n_events_logged", n_logged), ("n_events_decided", rec["n_events"]),
                              ("decision_coverage", rec["n_events"] / n_logged if n_logged else math.nan),
                              ("deterministic_share", rec["n_deterministic"] / rec["n_events"]),
                              ("base_policy_share", rec["n_with_base"] / rec["n_events"]),
                              ("reorder_share", rec["n_reorder"] / rec["n_events"])):
            diags.append({"policy_id": p, "metric": metric, "slot": None, "value": float(value)})

    # derived re-orderings depend on the logged slate, not on x alone: only the re-ordering estimator applies
    derived = [p for p in policies if p.startswith("reorder_")]
    x_policies = [p for p in policies if p not in derived]
    scav = []
    if not x_policies:
        pass
    elif "scavenging_slate" in wanted:
        scav.append(scav_mod.slate_estimates(stats, x_policies, options.delta, options.level, options.n_ads,
                                             options.uniform_logging))
    if "scavenging_base" in wanted and x_policies:
        scav.append(scav_mod.base_policy_estimates(stats, x_policies, options.delta, options.level,
                                                   options.uniform_logging))
    for df in scav:
        for _, r in df.iterrows():
            value, se, lo, hi = r["value"], r["std_error"], r["ci_low"], r["ci_high"]
            rows.append(_row(r["policy_id"], r["estimator"], value, se, lo, hi,
                             r["interval_kind"], int(r["n_events"]), window, r["level"],
                             supported_share=r["supported_share"], unsupported_share=r["unsupported_share"],
                             note=f"matched={int(r['n_matched'])} actions_used={int(r['actions_used'])} "
                                  f"k={r['n_actions']:.6g}"))

    need_adc = ("factored" in wanted) or ("reorder" in wanted)
    if need_adc and C is None and len(stats.table("factored")) + len(stats.table("ad_position")):
        C, adc_table, adc_source = resolve_adc(options, stats, K)
    if need_adc and C is not None and (np.any(~np.isfinite(C)) or np.any(C <= 0)):
        message = (f"ADC vector has missing or non-positive coefficients: {C.tolist()} (e.g. a slotted layout, "
                   "where no ad is shown at both position 1 and i); pass --adc with a stored ADC table")
        if options.estimators:  # asked for explicitly: the job cannot do what it was told
            raise DataCheckFailed(message)
        # default estimator set: leave the ADC-based estimators out, say so, and go on with the others
        for p in policies:
            diags.append({"policy_id": p, "metric": "adc_estimators_skipped", "slot": None, "value": 1.0})
        C = None
    if need_adc and C is not None:
        fac, fsq = stats.table("factored"), stats.table("factored_sq")
        tp = stats.table("target_placements")
        ap = stats.table("ad_position")
        T_a = factored_mod.ad_impressions(ap)
        for p in policies:
            n = int(pe.loc[pe["policy_id"] == p, "n_events"].iloc[0])
            f_p = fac[fac["policy_id"] == p] if len(fac) else fac
            q_p = fsq[fsq["policy_id"] == p] if len(fsq) else fsq
            if "factored" in wanted and p not in derived:
                est = factored_mod.factored_estimate(f_p, q_p, T_a, C, tp[tp["policy_id"] == p] if len(tp) else None,
                                                     options.level)
                rows.append(_row(p, "factored", est["value"], est["std_error"], est["ci_low"], est["ci_high"], "clt",
                                 n, window, options.level, supported_share=est["supported_share"],
                                 unsupported_share=est["unsupported_share"], adc_source=adc_source,
                                 adc_method=options.adc_method))
            rec = pe[pe["policy_id"] == p].iloc[0]
            if "reorder" in wanted and rec["n_reorder"] == rec["n_events"]:
                est = reorder_mod.reorder_estimate(f_p, q_p, ap, C, n, options.level)
                rows.append(_row(p, "reorder", est["value"], est["std_error"], est["ci_low"], est["ci_high"], "clt",
                                 n, window, options.level, supported_share=1.0, unsupported_share=0.0,
                                 adc_source=adc_source, adc_method=options.adc_method,
                                 note=f"unnormalized V(h_pi)={est['total']:.6g} clicks"))
                rows.append(_row(p, "reorder_lift", est["lift"], est["lift_std_error"], est["lift_ci_low"],
                                 est["lift_ci_high"], "clt", n, window, options.level, supported_share=1.0,
                                 unsupported_share=0.0, adc_source=adc_source, adc_method=options.adc_method,
                                 note="expected clicks under the new order per logged click"))

    slate_wanted = [e for e in wanted if e in SLATE_ESTIMATORS]
    sm = stats.table("slate_moments")
    if slate_wanted and len(sm):
        from .estimators import slate as slate_mod

        for p in x_policies:
            m = _slate_moments_for(sm, p)
            if m is None:
                continue
            if m.n <= 1:
                diags.append({"policy_id": p, "metric": "slate_events_with_propensities", "slot": None,
                              "value": float(m.n)})
                continue
            fr = slate_mod.estimate_frame(m, p, options.level, options.prior_mean, None, slate_wanted)
            for _, r in fr.iterrows():
                rows.append(_row(p, r["estimator"], r["value"], r["std_error"], r["ci_low"], r["ci_high"],
                                 r["interval_kind"], int(r["n_events"]), window, options.level,
                                 supported_share=(m.n_W_pos / m.n) if r["estimator"] in ("slate_ips", "slate_snips")
                                 else None,
                                 n_missing_propensity=int(r["n_missing_propensity"]), prior_mean=r["prior_mean"],
                                 prior_source=r["prior_source"]))
            d = slate_mod.diagnostics_frame(m, p, options.prior_mean)
            diags.extend(d.to_dict("records"))

    est = pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)
    diag = pd.DataFrame(diags, columns=DIAGNOSTIC_COLUMNS)
    if len(diag):
        diag["slot"] = diag["slot"].astype("Int64")
        diag["value"] = diag["value"].astype(float)
    return est, diag, adc_table


# ---- top level -------------------------------------------------------------------------------------------------
def _derived(spark, logs_source, options: EvaluateOptions, stats_dir, date_from):
    """(derived_decisions function, spec) for the --reorder policies; fits CTR scores on earlier windows."""
    from .contract import parse_date
    from .statistics import reorder as R

    if not options.reorder:
        return None, None
    builders, spec = [], []
    start = parse_date(date_from, "--from")
    for r in options.reorder:
        if r["kind"] == "random":
            builders.append(lambda sp, logs, r=r: R.random_reorder(logs, r["policy_id"], r["seed"]))
            spec.append(r)
        elif r["kind"] == "ctr":
            fit_to = parse_date(r["fit_to"], "ctr fit --to")
            if start is None or fit_to >= start:
                raise UsageError("--reorder ctr:FROM:TO: the fit window must end before --from "
                                 "(fitted and evaluated on disjoint windows)")
            fit = adc_statistics(spark, logs_source, r["fit_from"], r["fit_to"], stats_dir)
            scores = R.ctr_scores(fit.table("ad_position"))
            if not len(scores):
                raise DataCheckFailed(f"--reorder ctr: no impressions in the fit window {r['fit_from']}..{r['fit_to']}")
            builders.append(lambda sp, logs, r=r, s=scores: R.score_reorder(sp, logs, s, r["policy_id"]))
            spec.append({**r, "scores_sha": hashlib.sha256(scores.to_csv(index=False).encode()).hexdigest()})
        elif r["kind"] == "scores":
            path = Path(r["path"])
            if not path.exists():
                raise UsageError(f"--reorder scores: no such file {path}")
            scores = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
            builders.append(lambda sp, logs, r=r, s=scores: R.score_reorder(sp, logs, s, r["policy_id"]))
            spec.append({**r, "scores_sha": hashlib.sha256(scores.to_csv(index=False).encode()).hexdigest()})

    def derived(sp, logs):
        frames = [b(sp, logs) for b in builders]
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out

    return derived, json.loads(json.dumps(spec, default=str))


def checks_for(estimator: str) -> tuple:
    """The assumption checks (checks/gate.py letters) an estimator relies on."""
    from .checks.gate import ESTIMATOR_CHECKS

    key = estimator[len("slate_"):] if estimator.startswith("slate_") else estimator
    return tuple(ESTIMATOR_CHECKS.get(key, ()))


def run_window_gate(spark, logs: str, decisions: str | None, date_from, date_to, estimators: list,
                    gate_config, policies=None):
    """Run the data gate (quarantine + the assumption checks ``estimators`` rely on) on the window.

    Returns the GateResult (clean rows cached; call ``release()`` when done). Raises DataCheckFailed when the
    quarantined share passes its threshold. Assumption failures are left to the caller (per estimator)."""
    from .checks.gate import run_gate
    from .contract import read_decisions, read_logs

    checks = sorted({c for e in estimators for c in checks_for(e)})
    logs_df = read_logs(spark, logs, date_from, date_to)
    dec_df = read_decisions(spark, decisions, date_from, date_to, policies) if decisions else None
    from .progress import phase

    with phase(spark, "gate", f"quarantine and checks {','.join(checks) or '-'} {date_from or ''}..{date_to or ''}"):
        result = run_gate(spark, logs_df, dec_df, checks=tuple(checks), config=gate_config)
    quarantine_failed = [r for r in result.verdict_records()
                         if r.get("check") == "quarantine" and r.get("verdict") == "fail"]
    if quarantine_failed and gate_config.gate:
        result.release()
        raise DataCheckFailed("; ".join(r["message"] for r in quarantine_failed), verdicts=result.verdict_records())
    return result


def _apply_gate_to_estimators(options: EvaluateOptions, gate_result, enforce: bool) -> tuple[list, list]:
    """(estimators to run, notes). An explicitly requested estimator whose assumption failed stops the job
    (exit 3) when enforcing; from the default set it is left out with a note."""
    wanted = options.normalized_estimators()
    keep, notes, refused = [], [], []
    for e in wanted:
        failed = [c for c in checks_for(e) if gate_result.check_verdicts.get(c) == "fail"]
        if not failed:
            keep.append(e)
            continue
        note = f"{e}: check(s) {','.join(failed)} failed"
        if enforce and options.estimators:
            refused.append(note)
        else:
            notes.append(note + ("; not estimated" if enforce else "; estimate marked"))
            if not enforce:
                keep.append(e)
    if refused:
        msgs = [r["message"] for r in gate_result.verdict_records() if r.get("verdict") == "fail"]
        raise DataCheckFailed("refusing to write estimates whose assumptions failed: " + "; ".join(refused)
                              + (" -- " + " | ".join(msgs[:5]) if msgs else ""),
                              verdicts=gate_result.verdict_records())
    return keep, notes


def evaluate(spark, logs: str, decisions: str | None, date_from=None, date_to=None, stats_dir: str | None = None,
             options: EvaluateOptions | None = None, config: StatsConfig | None = None,
             gate_config=None) -> Evaluation:
    """Gate (optional) -> statistics of the window (stored days reused) -> every requested estimator per policy.

    With ``gate_config`` (checks.gate.GateConfig) the window goes through the data gate first: quarantined rows
    are set aside (the statistics are computed on the clean rows), and every estimate carries the verdicts of
    the checks it relies on (column ``checks``). ``gate_config.gate`` True enforces: a failed assumption of an
    explicitly requested estimator exits 3 (DataCheckFailed); estimators only in the default set are left out."""
    options = options or EvaluateOptions()
    config = config or StatsConfig()
    options.normalized_estimators()  # validate names early (exit 2)
    derived, spec = _derived(spark, logs, options, stats_dir, date_from)
    if decisions is None and derived is None:
        raise UsageError("evaluate needs --decisions or at least one --reorder policy")
    gate_result, gate_notes, verdicts = None, [], []
    if gate_config is not None:
        gate_result = run_window_gate(spark, logs, decisions, date_from, date_to, options.normalized_estimators(),
                                      gate_config, options.policies)
        keep, gate_notes = _apply_gate_to_estimators(options, gate_result, gate_config.gate)
        verdicts = gate_result.verdict_records()
        options = EvaluateOptions(**{**options.__dict__, "estimators": keep or ["__none__"]}) if keep != \
            options.normalized_estimators() else options
    try:
        if options.estimators == ["__none__"]:
            raise DataCheckFailed("no estimator left to run: " + "; ".join(gate_notes), verdicts=verdicts)
        stats = window_statistics(
            spark, logs, decisions, date_from, date_to, stats_dir, config, policies=options.policies,
            derived_decisions=derived, derived_spec=spec,
            logs_df=gate_result.clean_logs if gate_result else None,
            decisions_df=gate_result.clean_decisions if gate_result else None,
            rows_tag="clean" if gate_result else None)
        if not stats.dates:
            raise DataCheckFailed(f"no log partitions in the window {date_from}..{date_to}")
        verdicts += gate("statistics", stats)
        est, diag, adc_table = estimates_from_stats(stats, options)
    finally:
        if gate_result is not None:
            gate_result.release()
    verdicts += gate("estimates", est)
    if gate_result is not None:
        est["checks"] = [" ".join(f"{c}:{gate_result.check_verdicts.get(c, 'not_run')}" for c in checks_for(e))
                         for e in est["estimator"]]
        extra = [{"policy_id": None, "metric": "gate_note: " + n, "slot": None, "value": 1.0} for n in gate_notes]
        if extra:
            diag = pd.concat([diag, pd.DataFrame(extra, columns=DIAGNOSTIC_COLUMNS)], ignore_index=True)
    else:
        est["checks"] = "not_run"
    return Evaluation(estimates=est, diagnostics=diag, adc=adc_table, stats=stats, verdicts=verdicts,
                      gate_counts=dict(gate_result.counts) if gate_result is not None else {})


def write_table(df: pd.DataFrame, out_dir: str, name: str) -> str:
    """Small result tables: one Parquet file under <out>/<name>/ (readable by Spark and pandas), committed as a
    whole directory (result.atomic_dir), so a killed job leaves the previous table or the new one, never half."""
    from .result import atomic_dir

    d = Path(out_dir) / name
    with atomic_dir(d) as tmp:
        df.to_parquet(tmp / "part-0.parquet", index=False)
    return str(d)
