"""Runs the registry's estimators: each declaration's ``estimate(stats, policy_id, options)`` for every target
policy, its answer completed into rows of the estimates table.

What the pipeline adds to an estimator's dict (estimators/declaration.py):
- a CLT interval value -/+ z std_error at ``level`` when the function gives a standard error and no interval of its
  own (none, with the reason, where the standard error is 0 or not finite: estimators/intervals.clt_or_none);
- identification: a value that is not finite is not identified, with the function's reason, else the declaration's
  ``identification`` (what the data must show);
- ``n_events`` (the policy's decided events) when the function gives none.
The gate's verdicts, the ``checks`` column and the recommended flag follow in pipelines/evaluate.finish.
"""
from __future__ import annotations

import math

from .. import registry
from ..estimators.intervals import clt_or_none
from ..estimators.rows import _policy_events, estimate_columns, row
from ..estimators.slate_sequences import NO_SEQUENCE

_CORE = ("policy_id", "estimator", "value", "std_error", "ci_low", "ci_high", "interval_kind", "n_events", "level",
         "identified", "reason")


def run_estimators(stats, policies: list, run: list, options) -> list[dict]:
    """Rows of every estimator in ``run`` for every policy (``options``: estimators.declaration.EstimateOptions;
    a policy in ``options.derived``, a re-ordering of the logged slate, only for estimators declared ``derived``)."""
    rows = []
    for name in run:
        spec = registry.get(name)
        for p in policies:
            if p in options.derived and not spec.derived:
                continue
            rows += complete(spec, p, spec.function(stats, p, options), options.level, _n_events(stats, p))
    return rows


def prepare_windows(stats, run: list, options, kind: str) -> None:
    """Each estimator's ``windows`` hook (estimators/declaration.Estimator) over the whole window: what --by-day's
    windows (``kind`` "by_day") or running/'s prefixes ("running") read from the engine, into ``options.shared``,
    before they run in worker processes that have no engine (pipelines/window_pool.py)."""
    for name in run:
        hook = registry.get(name).windows_function
        if hook is not None:
            hook(stats, options, kind)


def _n_events(stats, policy_id) -> int:
    return _policy_events(stats, policy_id, "n_events")


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _number(x) -> bool:
    """A value that is a number (infinite included: rows.row says it overflows); None and NaN are none."""
    try:
        return x is not None and not math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def complete(spec, policy_id, answer, level: float, n_events: int = 0) -> list[dict]:
    """The rows of one estimator's answer (a dict, a list of dicts, or None for no row) for one policy."""
    if answer is None:
        return []
    answers = [answer] if isinstance(answer, dict) else list(answer)
    allowed = set(estimate_columns()) | {"identified"}
    out = []
    for d in answers:
        if not isinstance(d, dict):
            raise TypeError(f"estimator {spec.name!r} returned {type(d).__name__}, not a dict of its estimate")
        unknown = sorted(set(d) - allowed)
        if unknown:
            raise ValueError(f"estimator {spec.name!r} returned unknown key(s) {unknown}; an estimate holds "
                             f"columns of the estimates table: {sorted(allowed)}")
        name = d.get("estimator") or spec.name
        if name not in spec.names():
            raise ValueError(f"estimator {spec.name!r} wrote a row named {name!r}, which its declaration's "
                             f"outputs {spec.outputs} do not list")
        if d.get("policy_id") not in (None, policy_id):
            raise ValueError(f"estimator {spec.name!r} wrote a row of policy {d['policy_id']!r} when asked for "
                             f"{policy_id!r}")
        out.append(_row(spec, policy_id, name, d, level, n_events))
    return out


def _row(spec, policy_id, name: str, d: dict, level: float, n_events: int) -> dict:
    value, se = d.get("value"), d.get("std_error")
    identified = bool(d["identified"]) if "identified" in d else _number(value)
    reason = d.get("reason")
    lo, hi, kind = d.get("ci_low"), d.get("ci_high"), d.get("interval_kind")
    if identified and lo is None and hi is None and kind is None:     # no interval of its own: the CLT one
        lo, hi, kind, why = clt_or_none(float(value), float(se) if _number(se) else math.nan,
                                        float(d.get("level") or level))
        reason = reason or why
    if not identified and not reason:
        reason = (f"not identified: needs {spec.identification}" if spec.identification else
                  f"{name} gave no value")
    nan = math.nan
    extra = {k: v for k, v in d.items() if k not in _CORE}
    if identified and not _number(extra.get("cs_low")) and not extra.get("cs_reason"):   # no band of its own
        extra["cs_reason"] = NO_SEQUENCE
    return row(policy_id, name, float(value) if _number(value) else nan,
               float(se) if se is not None else nan, nan if lo is None else float(lo),
               nan if hi is None else float(hi), kind or "none",
               int(d["n_events"]) if d.get("n_events") is not None else n_events, d.get("level") or level,
               identified=identified, reason=reason, **extra)
