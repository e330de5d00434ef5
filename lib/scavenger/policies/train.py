"""Orchestration of ``scavenger train`` (also ``scavenger.train`` in a notebook): train on one window, decide on a
later one, on either engine.

read logs -> training rows (Spark SQL) -> sufficient statistics per (context, ad, position), summed exactly ->
learners fitted in numpy/scipy (regression and/or cost-sensitive) -> scores of (context, candidate ad) -> per-event
choice restricted to eligible ads (Spark SQL) -> decisions (contract ``decisions``; policy_id =
"<method>@<from>..<to>") under out/decisions, per-event notes for events with fewer than m eligible ads /
fallback-scored ads / replaced duplicates under out/decision_notes, models under out/model/<method>/ (model.json,
coefficients.npz), and a summary (result.json via the caller). The same logs give the same models and decisions on
DuckDB and Spark. The learned policies' value is estimated by the ``evaluate`` pipeline (``judge.factored_values``)
and, on generator logs, compared with the truth (``judge.truth_report``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..contract import LOGS, load_contract, parse_date
from ..errors import DataCheckFailed, UsageError
from . import eligibility as el
from . import features as fe
from . import steps

METHODS = ("regression", "cost_sensitive")


@dataclass
class TrainConfig:
    logs: object                      # path, catalog table, or a DataFrame (Spark, pandas, pyarrow)
    date_from: str
    date_to: str
    score_from: str
    score_to: str
    out: str
    method: str = "both"
    m: int = 4
    adc: str = "estimate"
    adc_method: str = "heuristic"     # the evaluate default (issue 30); for the offset and for the estimate
    eligibility: str | None = None
    seed: int = 0
    interactions: str = "2"
    max_pair_keys: int = fe.PAIR_KEYS  # interactions 2/full: entries of a context that form pairs (features)
    reg_param: float = 1e-4
    max_iter: int = 25
    truth: str | None = None          # generator truth dir ('auto': <logs>/../truth when it exists; 'none': off)
    estimate: bool = True             # factored estimate of every learned policy on the scoring window
    dedup: str = "random"             # cost-sensitive duplicates: random | next_best | both (two policies)
    gate: str = "enforce"             # the estimate's data gate, evaluate's: enforce refuses, report marks, off
    max_id_length: int = 1000         # rows holding a longer id, context key or value are left out (ID_TOO_LONG)
    extra: dict = field(default_factory=dict)

    def rules(self):
        """The row rules of the estimate's gate and of the rows left out (checks.rules.RuleConfig)."""
        from ..checks.rules import RuleConfig

        return RuleConfig(max_id_length=self.max_id_length)

    def methods(self) -> list[str]:
        if self.method == "both":
            return list(METHODS)
        if self.method not in METHODS:
            raise UsageError(f"--method must be regression, cost_sensitive or both; got {self.method!r}")
        return [self.method]

    def check(self) -> None:
        from ..estimators.attention_decay import METHODS as ADC_METHODS

        el.check_m(self.m)
        self.methods()
        f, t = parse_date(self.date_from, "--from"), parse_date(self.date_to, "--to")
        sf, st = parse_date(self.score_from, "--score-from"), parse_date(self.score_to, "--score-to")
        if f is None or t is None or sf is None or st is None:
            raise UsageError("--from, --to, --score-from and --score-to are required")
        if f > t or sf > st:
            raise UsageError("a window's start is after its end")
        if sf <= t:
            raise UsageError(f"the scoring window must start after the training window (--score-from {sf} <= --to {t})")
        self.date_from, self.date_to, self.score_from, self.score_to = (d.isoformat() for d in (f, t, sf, st))
        from ..pipelines.common import GATE_MODES

        if self.gate not in GATE_MODES:
            raise UsageError(f"--gate must be one of {', '.join(GATE_MODES)}; got {self.gate!r}")
        if self.dedup not in ("random", "next_best", "both"):
            raise UsageError(f"--dedup must be random, next_best or both; got {self.dedup!r}")
        if self.interactions not in fe.INTERACTIONS:
            raise UsageError(f"--interactions must be one of {', '.join(fe.INTERACTIONS)}")
        self.max_pair_keys = fe.check_pair_keys(self.max_pair_keys)
        if self.adc in (None, "", "estimate") and self.adc_method not in ADC_METHODS:
            raise UsageError(f"--adc-method must be one of {', '.join(ADC_METHODS)}; got {self.adc_method!r}")
        from ..pipelines.options import check_id_length

        check_id_length(self.max_id_length)
        if not 0 <= self.reg_param < float("inf") or int(self.max_iter) < 1:
            raise UsageError("--reg-param must be a finite number >= 0 and --max-iter >= 1")


@dataclass
class TrainInputs:
    """The inputs of a training run, described before any engine starts (io/sources.py)."""

    logs: object                      # Source over both windows
    eligibility: object = None        # Source or None

    def all(self) -> list:
        return [s for s in (self.logs, self.eligibility) if s is not None]

    def training(self, cfg: TrainConfig):
        from ..pipelines.common import Inputs

        return Inputs(self.logs, None, parse_date(cfg.date_from), parse_date(cfg.date_to))


def prepare(cfg: TrainConfig) -> TrainInputs:
    """Check the configuration and describe the inputs (exit 2 on bad usage), without an engine."""
    from ..io import fs, sources

    cfg.check()
    if isinstance(cfg.out, str):
        fs.check_writable(cfg.out, "--out")
    logs = sources.describe(cfg.logs, load_contract(LOGS), parse_date(cfg.date_from), parse_date(cfg.score_to))
    # a training window outside the logs' dt= days is exit 2 naming those days (as evaluate's); an empty scoring
    # window stays exit 3 after training, keeping the training counts (steps.scoring_window)
    sources.require_days(logs, parse_date(cfg.date_from), parse_date(cfg.date_to), "--from/--to")
    return TrainInputs(logs, el.source(cfg.eligibility))


def _truth_dir(cfg: TrainConfig) -> str | None:
    if cfg.truth in (None, "none"):
        return None
    if cfg.truth == "auto":
        if not isinstance(cfg.logs, str):
            return None
        cand = os.path.join(os.path.dirname(os.path.abspath(cfg.logs.rstrip("/"))), "truth")
        return cand if os.path.exists(os.path.join(cand, "click_rates")) else None
    if not os.path.exists(os.path.join(cfg.truth, "click_rates")):
        raise UsageError(f"--truth {cfg.truth} has no click_rates table (expected a generator truth/ directory)")
    return cfg.truth


def run_training(engine, cfg: TrainConfig, result=None, inputs: TrainInputs | None = None) -> dict:
    """Train, decide, write, judge; returns the summary dict (also filled into ``result`` when given)."""
    inputs = inputs or prepare(cfg)
    truth_dir = _truth_dir(cfg)
    C, adc_source = fe.resolve_adc(engine, cfg.adc, inputs.training(cfg), cfg.adc_method, cfg.rules())
    data = steps.training_data(engine, cfg, inputs.logs, C)
    if result is not None:
        result.counts.update(data.counts)   # a later step that stops the job (exit 3) leaves these in result.json
    sc = steps.scoring_window(engine, cfg, inputs.logs, inputs.eligibility, data)
    counts = {**data.counts, "score_events": sc.n_events, "score_contexts": int(len(sc.contexts)),
              "score_rows_pairs_capped": int(sc.capped[0]), "score_contexts_pairs_capped": int(sc.capped[1]),
              "score_rows_too_long": int(sc.too_long),
              "eligible_ads_unseen_in_training": int((~sc.ads["known"].astype(bool)).sum())}
    if result is not None:
        result.counts.update(counts)
    decided, skipped = [], []
    for method in cfg.methods():
        try:
            decided += steps.decide(engine, cfg, method, data, sc, C, adc_source)
        except DataCheckFailed as exc:
            if cfg.method != "both" or method == "regression":
                raise
            # the default pair of methods: logs without propensities still train the regression, which needs none
            skipped.append(f"cost_sensitive not trained: {exc}")
    written = steps.write_decisions(engine, cfg, decided, sc.n_events)
    summary = {"engine": engine.info.to_dict(), "train_window": [cfg.date_from, cfg.date_to],
               "score_window": [cfg.score_from, cfg.score_to], "m": int(cfg.m), "adc": [float(c) for c in C],
               "adc_source": adc_source, "adc_method": cfg.adc_method, "interactions": cfg.interactions,
               "max_pair_keys": int(cfg.max_pair_keys),
               "eligibility": {"source": cfg.eligibility, "level": sc.level}, **written}
    capped = _capped_warning(cfg, counts)
    skipped += _too_long_warning(cfg, counts)
    if int(cfg.m) > len(C):
        skipped.append(f"--m {int(cfg.m)} is more than the {len(C)} position(s) the ADC vector covers: the slates "
                       f"place ads at positions {len(C) + 1}..{int(cfg.m)}, which have no attention coefficient, so "
                       f"the factored estimate of these policies is not identified without an --adc table covering "
                       f"them; pass --m {len(C)} to stay within the logs' positions")
    if capped or skipped:
        summary["warnings"] = ([capped] if capped else []) + skipped
    if truth_dir:
        _judge_truth(engine, cfg, summary, truth_dir, sc)
    verdicts = _estimate(engine, cfg, summary, _given_adc_table(cfg, adc_source, C)) if cfg.estimate else []
    summary["counts"] = counts
    if result is not None:
        result.summary.update({k: v for k, v in summary.items() if k not in ("counts", "engine")})
        result.summary["estimates"] = [{"policy_id": pid, "estimator": "factored", **p["factored_estimate"]}
                                       for pid, p in summary["policies"].items() if "factored_estimate" in p]
        result.verdicts = verdicts
        result.inputs.update({"logs": cfg.logs if isinstance(cfg.logs, str) else inputs.logs.name,
                              "eligibility": cfg.eligibility, "adc": cfg.adc, "adc_method": cfg.adc_method})
        result.outputs.update({"decisions": written["decisions_path"], "model": os.path.join(str(cfg.out), "model"),
                               "decision_notes": os.path.join(str(cfg.out), "decision_notes")})
        if summary.get("estimate_adc", {}).get("adc_method") == "given":
            result.outputs["adc"] = summary["estimate_adc"]["adc"]
    return summary


def _capped_warning(cfg: TrainConfig, counts: dict) -> str | None:
    """The run summary's warning when some contexts had more entries than --max-pair-keys (features docstring)."""
    tr, sc = counts.get("train_rows_pairs_capped", 0), counts.get("score_rows_pairs_capped", 0)
    if not (tr or sc):
        return None
    return (f"{tr} training and {sc} scoring rows ({counts.get('train_contexts_pairs_capped', 0)} and "
            f"{counts.get('score_contexts_pairs_capped', 0)} distinct contexts) have more than {cfg.max_pair_keys} "
            f"context entries: their pair interactions use the first {cfg.max_pair_keys} entries in key order "
            f"(--max-pair-keys)")


def _too_long_warning(cfg: TrainConfig, counts: dict) -> list[str]:
    """The run summary's warning when rows were left out for an id, context key or value beyond --max-id-length."""
    tr, sc = counts.get("train_rows_too_long", 0), counts.get("score_rows_too_long", 0)
    if not (tr or sc):
        return []
    return [f"{tr} training and {sc} scoring rows hold an id, context key or value longer than {cfg.max_id_length} "
            f"characters and were left out (evaluate quarantines them as ID_TOO_LONG or CONTEXT_TOO_LONG; "
            f"--max-id-length)"]


def _judge_truth(engine, cfg: TrainConfig, summary: dict, truth_dir: str, sc) -> None:
    from .assessment import truth_report

    report = truth_report(engine, truth_dir, int(cfg.m), sc.n_events, "tr_cands" if sc.level else None, sc.scores)
    summary["truth"] = {**{k: v for k, v in report.items() if k != "policies"}, "dir": truth_dir}
    for pid, vals in report["policies"].items():
        if pid in summary["policies"]:
            if "regret_bound" in vals:
                vals["set_regret_under_bound"] = bool(vals["set_regret"] <= vals["regret_bound"] + 1e-12)
            summary["policies"][pid]["truth"] = vals


def _given_adc_table(cfg: TrainConfig, adc_source: str, C) -> str | None:
    """ADCs given as numbers: written as out/adc (judge.given_adc_table) for the estimate to read, and for a later
    ``scavenger evaluate --adc OUT/adc --adc-method given``; None for a stored table or 'estimate'."""
    if adc_source != "numbers":
        return None
    from ..io import fs
    from .assessment import given_adc_table

    path = fs.join(cfg.out, "adc")
    fs.write_parquet(fs.join(path, "part-0.parquet"), given_adc_table(C))
    return path


def _estimate(engine, cfg: TrainConfig, summary: dict, given_table: str | None = None) -> list:
    """The evaluate pipeline's factored estimate of every learned policy on the scoring window, with the ADCs of
    --adc (judge.estimate_adc_spec: numbers and tables as given, 'estimate' re-estimated on that window), under
    evaluate's gate (--gate): its checks (a, b) and notes go to the summary as evaluate's do, an estimate the gate
    refuses (enforce, a failed check) is no number but a warning. Returns the verdicts (result.json); last: its
    scan releases the engine's relations."""
    import math

    from .assessment import estimate_adc_spec, factored_values
    from ..pipelines.common import GateConfig

    pids = list(summary["policies"])
    adc, adc_method, said = estimate_adc_spec(cfg.adc, cfg.adc_method, given_table)
    summary["estimate_adc"] = {"adc": adc, "adc_method": adc_method, "source": said}
    gate = GateConfig(rules=cfg.rules(), mode=cfg.gate, great_expectations=False)
    try:
        judged = factored_values(engine, cfg.logs, summary["decisions_path"], (cfg.score_from, cfg.score_to), pids,
                                 adc_method, adc=adc, gate=gate)
    except DataCheckFailed as exc:
        summary["estimate_error"] = str(exc)
        summary["checks"] = _estimate_checks(exc.verdicts, cfg.gate)
        summary.setdefault("warnings", []).append(_refusal(str(exc), summary["checks"], cfg.gate))
        return list(exc.verdicts)
    summary["checks"] = judged.checks
    summary.setdefault("notes", []).extend(judged.notes)
    if judged.warnings:
        summary.setdefault("warnings", []).extend(judged.warnings)
    est = judged.frame
    for row in est.to_dict("records"):
        pol = summary["policies"].get(row["policy_id"])
        if pol is None:
            continue
        fe_ = {k: row[k] for k in ("value", "std_error", "ci_low", "ci_high", "interval_kind", "supported_share",
                                   "identified", "reason", "checks", "adc_method", "adc_source", "adc")}
        truth = pol.get("truth", {}).get("true_value")
        if truth is not None and math.isfinite(fe_["ci_low"]) and math.isfinite(fe_["ci_high"]):
            fe_["covers_true_value"] = bool(fe_["ci_low"] <= truth <= fe_["ci_high"])
        pol["factored_estimate"] = fe_
    vectors = {tuple(p["factored_estimate"]["adc"]) for p in summary["policies"].values() if "factored_estimate" in p}
    shown = ", ".join(f"{c:.4g}" for c in next(iter(vectors))) if len(vectors) == 1 else "-"
    summary.setdefault("notes", []).append(f"factored estimate with ADCs {said}: C = {shown}")
    return judged.verdicts


def _estimate_checks(verdicts: list, gate: str) -> dict:
    """The factored estimator's checks' worst verdicts (as evaluate's result.json 'checks') from a refusal's
    verdicts; none with the gate off."""
    from .. import registry
    from ..checks.judge import worst_by_check

    return worst_by_check(verdicts, registry.checks_for(["factored"]) if gate != "off" else ()) if verdicts else {}


def _refusal(message: str, checks: dict, gate: str) -> str:
    """The summary's warning for an estimate the evaluate pipeline did not give: the gate's refusal (a failed
    check under enforce, with the way to see it marked) or another data condition."""
    from ..checks.assumptions import CHECK_NAMES

    failed = [c for c, v in checks.items() if v == "fail" and c != "quarantine"]
    if failed and gate == "enforce":
        names = ", ".join(f"{c} {CHECK_NAMES.get(c, c)}" for c in failed)
        return (f"factored estimate refused by --gate enforce as evaluate refuses it: check {names} failed; "
                f"--gate report prints it marked (result.json estimate_error: {message})")
    return f"no factored estimate of the learned policies: {message}"
