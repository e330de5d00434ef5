"""Judging learned policies offline: the evaluate pipeline's estimate (always) and, on generator logs, the truth.

Truth (generator's ``truth/click_rates`` P(x, a) and ADCs C_k; ranked layout), per scoring-window event t with
eligible set A_t (all truth ads without an eligibility table) and the policy's ads h(x_t) at positions 1..m:

- true value           V(h)   = mean_t sum_k C_k P(x_t, h_k(x_t))                     (seed 001 section 4)
- oracle value         V*     = mean_t sum_k C_k P_(k)(x_t), P_(1) >= P_(2) >= ... over A_t, k <= m
- positional regret    V* - V(h)
- set value / regret   S(h) = mean_t sum_{a in h(x_t)} P(x_t, a);  r_ad = S* - S(h), S* = mean_t sum of the m
                       largest P over A_t (seed 000's position-free ASP regret, the one its bound is about)
- regression bound     r_ad <= sqrt(2 min(m, |A| - m)) sqrt(|A|) sqrt(eps),
                       eps = mean_t (1/|A|) sum_{a in A} (g(x_t, a) - P(x_t, a))^2 (A = all ads of the truth plus any
                       ad the policy scored, P = 0 for ads unknown to the truth; the L2 regret of g, P being the
                       minimum-error regressor); also the per-instance form before Jensen,
                       mean_t sqrt(2 min(m, |A| - m)) sqrt(sum_a (g - P)^2).
- logging policy       the same true value of the logged slates (sum_k C_k P(x_t, logged a_k)).
True values are the generator's own statement (``simulation.generator.true_policy_value_sql``) on the engine.

Estimate: ``factored_values`` runs the ``evaluate`` pipeline (pipelines/evaluate.py, estimators/adc_family.adc_based_rows) on the
scoring window and the written decisions: the factored estimator with the ADCs train was given (--adc numbers, as a
table of method 'given'; a stored table, as evaluate reads it) or, with --adc estimate, the ADCs estimated from that
window and their uncertainty propagated into the interval (estimators/propagate.py); the checks it relies on (a, b)
under train's --gate, evaluate's gate: enforce refuses an estimate whose check failed, report marks it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .scoring_sql import coef_case, double


def regression_bound(m: int, n_ads: int, eps: float) -> float:
    """sqrt(2 min(m, |A| - m)) sqrt(|A|) sqrt(eps)   (seed 000, Theorem "ASP Regression Regret Bound")."""
    return math.sqrt(2 * min(m, n_ads - m)) * math.sqrt(n_ads) * math.sqrt(max(eps, 0.0))


def read_truth(engine, truth_dir: str) -> tuple[np.ndarray, pd.DataFrame]:
    """(C_1..C_K, click rates as pandas) of a generator truth dir; the rates also as relation ``tr_rates``."""
    from ..io import fs

    adc = fs.read_parquet(fs.join(truth_dir, "adc")).sort_values("position")["coefficient"].to_numpy(float)
    files = [f[0] for f in fs.data_files(fs.join(truth_dir, "click_rates"))]
    engine.read_parquet("tr_rates", files)
    return adc, fs.read_parquet(fs.join(truth_dir, "click_rates"))


def _oracle_sql(m: int, adc: np.ndarray, cands: str | None) -> str:
    """Sums over events of the m largest P among the eligible ads (s_star) and of C_k times them (v_star)."""
    if cands is None:
        rows = "SELECT e.dt, e.event_id, t.p FROM tr_sc_events e JOIN tr_rates t ON e.context_id = t.context_id"
    else:
        rows = (f"SELECT c.dt, c.event_id, t.p FROM {cands} c JOIN tr_rates t ON c.context_id = t.context_id "
                f"AND c.ad_id = t.ad_id")
    return f"""
SELECT sum(CASE WHEN r <= {int(m)} THEN p ELSE {double(0)} END) AS s_star,
  sum(CASE WHEN r <= {int(m)} THEN p * coalesce({coef_case(adc, 'r')}, {double(0)}) ELSE {double(0)} END) AS v_star
FROM (SELECT p, row_number() OVER (PARTITION BY dt, event_id ORDER BY p DESC) AS r FROM ({rows}) x) y"""


def _values(engine, adc: np.ndarray, decisions: str, m: int) -> pd.DataFrame:
    """Per policy: true value, set value (C = 1) and events, by the generator's statement."""
    from ..simulation.generator import true_policy_value_sql

    tv = engine.fetch(true_policy_value_sql(list(adc), decisions, "tr_sc_logs", "tr_rates"), "true_value")
    ones = [1.0] * max(int(m), len(adc))
    sv = engine.fetch(true_policy_value_sql(ones, decisions, "tr_sc_logs", "tr_rates"), "set_value")
    return tv.merge(sv.rename(columns={"true_value": "set_value"})[["policy_id", "set_value"]], on="policy_id")


def truth_report(engine, truth_dir: str, m: int, n_events: int, cands: str | None,
                 scores: dict | None = None) -> dict:
    """Per policy of ``tr_decided``: true value, oracle, regrets and, for policies in ``scores`` (policy_id -> score
    frame ctx_key, context_id, ad_id, score, known), eps and the regression bound. ``cands``: the candidate rows
    (eligibility), or None (all truth ads). Only aggregates are fetched."""
    adc, rates = read_truth(engine, truth_dir)
    n_ads = int(rates["ad_id"].nunique())
    o = engine.fetch(_oracle_sql(m, adc, cands), "oracle").iloc[0]
    s_star, v_star = float(o["s_star"] or 0.0) / n_events, float(o["v_star"] or 0.0) / n_events
    engine.view("tr_logged", f"SELECT 'logged' AS policy_id, event_id, transform(slots, s -> named_struct("
                             f"'position', s.position, 'ad_id', s.ad_id, 'probability', {double(1)})) AS slots "
                             f"FROM tr_sc_logs")
    logged = _values(engine, adc, "tr_logged", m)
    out = {"n_events": n_events, "n_ads": n_ads, "m": m, "oracle_value": v_star, "oracle_set_value": s_star,
           "logging_value": float(logged["true_value"].iloc[0]) if len(logged) else math.nan, "policies": {}}
    for row in _values(engine, adc, "tr_decided", m).to_dict("records"):
        v, s = float(row["true_value"]), float(row["set_value"])
        out["policies"][row["policy_id"]] = {
            "true_value": v, "set_value": s, "n_events": int(row["n_events"]),
            "regret": v_star - v, "set_regret": s_star - s,
            "regret_vs_oracle_share": (v_star - v) / v_star if v_star else math.nan,
            "beats_logging": bool(v > out["logging_value"]),
        }
    if scores:
        counts = engine.fetch("SELECT ctx_key, first(context_id) AS context_id, CAST(count(1) AS BIGINT) AS n "
                              "FROM tr_sc_events GROUP BY ctx_key", "context_counts")
        for pid, table in scores.items():
            if pid in out["policies"]:
                out["policies"][pid].update(regression_error(table, rates, counts, m))
    return out


def regression_error(scores: pd.DataFrame, rates: pd.DataFrame, counts: pd.DataFrame, m: int) -> dict:
    """eps = mean over events of (1/|A|) sum_{a in A} (g(x, a) - P(x, a))^2 and the bounds, with the policy's scores g.

    A = the truth's ads plus every ad the policy scored (an ad unknown to the truth has P = 0, the value it is
    credited with in the true value); ads missing from ``scores`` get the context's fallback (mean score of the
    known ads), as at decision time. ``counts``: events per context (ctx_key, context_id, n)."""
    ads = sorted(set(rates["ad_id"]) | set(scores["ad_id"]))
    P = rates.pivot_table(index="context_id", columns="ad_id", values="p", aggfunc="first") \
        .reindex(columns=ads).fillna(0.0)
    G = scores.pivot_table(index="ctx_key", columns="ad_id", values="score", aggfunc="first").reindex(columns=ads)
    prior = scores[scores["known"].astype(bool)].groupby("ctx_key")["score"].mean()
    G = G.reindex(counts["ctx_key"])
    G = G.T.fillna(prior.reindex(G.index)).T.fillna(0.0)
    Pm = P.reindex(counts["context_id"]).fillna(0.0).to_numpy(float)
    sse = ((G.to_numpy(float) - Pm) ** 2).sum(axis=1)
    n = counts["n"].to_numpy(float)
    n_all = len(ads)
    eps = float(n @ sse / n.sum() / n_all)
    kappa = 2 * min(m, n_all - m)
    return {"eps_l2": eps, "n_ads_bound": int(n_all), "regret_bound": regression_bound(m, n_all, eps),
            "regret_bound_per_instance": math.sqrt(kappa) * float(n @ np.sqrt(sse)) / float(n.sum())}


GIVEN_ADC_METHOD = "given"   # the method name of the ADC table written for ADCs given as numbers (given_adc_table)


def given_adc_table(C) -> pd.DataFrame:
    """ADCs given as numbers (--adc 1,0.6,0.4) as a stored ADC table (position, method 'given', coefficient): what
    the evaluate pipeline reads with --adc PATH --adc-method given, so the estimate uses exactly these C_k (no
    uncertainty: they are given, not estimated)."""
    C = [float(c) for c in C]
    return pd.DataFrame({"position": np.arange(1, len(C) + 1, dtype="int64"), "method": GIVEN_ADC_METHOD,
                         "coefficient": C})


def estimate_adc_spec(adc: str, adc_method: str, given_table: str | None) -> tuple[str, str, str]:
    """(evaluate's --adc, --adc-method, what the summary says) for the estimate of train's ``--adc``: 'estimate'
    re-estimates the ADCs from the scoring window (``adc_method``, their uncertainty propagated); a stored table
    is read as evaluate reads it; numbers are the table ``given_table`` written from them (given_adc_table)."""
    if adc in (None, "", "estimate"):
        return "estimate", adc_method, f"estimated from the scoring window ({adc_method})"
    if given_table is None:
        return adc, adc_method, f"the stored table --adc {adc} ({adc_method})"
    return given_table, GIVEN_ADC_METHOD, f"given --adc {adc}"


@dataclass
class Judged:
    """What the evaluate pipeline said of the learned policies: the factored rows and the gate's word on them."""

    frame: pd.DataFrame                             # factored_values' columns (docstring)
    checks: dict = field(default_factory=dict)      # check -> worst verdict (a, b, quarantine), as evaluate's
    verdicts: list = field(default_factory=list)
    notes: list = field(default_factory=list)       # evaluate's notes: failed checks ('estimates marked'), ...
    warnings: list = field(default_factory=list)    # evaluate's warnings: estimates leaving rows unused


def factored_values(engine, logs, decisions: str, window: tuple, policies: list, adc_method: str = "heuristic",
                    level: float = 0.95, adc: str = "estimate", gate=None) -> Judged:
    """The ``evaluate`` pipeline's factored estimate of ``policies`` over ``window`` (module docstring), with the
    ADCs ``adc`` (evaluate's --adc: 'estimate' or a stored table) and the data gate ``gate`` (GateConfig; default
    report): under enforce a failed check b (or a) refuses the estimate as evaluate does (DataCheckFailed with the
    verdicts), under report the rows are kept and marked by their checks column and a note.

    ``frame``: policy_id, value, std_error, ci_low, ci_high, interval_kind, supported_share, identified, reason,
    checks, adc_method, adc_source, adc (the ADC vector used)."""
    from ..pipelines import evaluate as P
    from ..pipelines.common import GateConfig, describe_inputs
    from ..statistics.scan import StatsConfig

    gate = gate or GateConfig(mode="report", great_expectations=False)
    inputs = describe_inputs(logs, decisions, window[0], window[1], policies)
    options = P.EvaluateOptions(estimators=["factored"], adc=adc, adc_method=adc_method, level=level,
                                policies=list(policies))
    ev = P.evaluate(engine, inputs, options, gate, StatsConfig(rules=gate.rules, policies=tuple(policies)))
    est = ev.estimates[ev.estimates["estimator"] == "factored"]
    adc_rows = ev.adc[ev.adc["method"] == adc_method].drop_duplicates("position").sort_values("position") \
        if ev.adc is not None else pd.DataFrame(columns=["coefficient"])
    cols = ["policy_id", "value", "std_error", "ci_low", "ci_high", "interval_kind", "supported_share",
            "identified", "reason", "checks", "adc_method", "adc_source"]
    frame = est[cols].assign(adc=[[float(c) for c in adc_rows["coefficient"]]] * len(est)).reset_index(drop=True)
    return Judged(frame, dict(ev.window.check_verdicts), list(ev.verdicts), list(ev.notes), list(ev.warnings))
