"""The steps of ``scavenger train`` (``train.run_training`` calls them in order), each a few statements on the engine
and numpy on what they fetch:

    training_data   training rows -> sufficient statistics per (context, ad, position), the training contexts
    scoring_window  the events to decide for, their contexts, the candidate ads (eligibility) per event
    decide          fit one method's learner, save it, score (context, candidate ad), choose per event (SQL)
    write_decisions every policy's decisions (contract ``decisions``) and per-event notes; per-policy counts
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..contract import DECISIONS, LOGS, load_contract, select_sql
from ..errors import DataCheckFailed
from . import cost_sensitive as cs
from . import eligibility as el
from . import regression as rg
from . import scoring_sql as S
from .features import capped_rows, tokens_by_context
from .learning import aggregated


def days(first: _dt.date, last: _dt.date) -> set:
    return {first + _dt.timedelta(days=i) for i in range((last - first).days + 1)}


@dataclass
class Training:
    agg: pd.DataFrame          # learning.aggregated rows
    tokens: dict               # ctx_key -> context tokens
    counts: dict


@dataclass
class Scoring:
    contexts: pd.DataFrame     # ctx_key, context_id, tokens (the scoring window's distinct contexts)
    ads: pd.DataFrame          # ad_id, known: the ads scored (eligible ads, or the training ads)
    level: str | None          # eligibility level, or None
    n_events: int
    capped: tuple = (0, 0)     # (rows, contexts) whose pair tokens were capped (features.capped_rows)
    too_long: int = 0          # rows left out for an id, context key or value beyond --max-id-length
    scores: dict = field(default_factory=dict)   # policy_id -> score frame (regression)


def read_within_limits(engine, name: str, logs, window: set, cfg) -> int:
    """Relation ``name``: the conformed logs of the days ``window``, less the rows holding an id, a context key or
    value longer than --max-id-length (statements.length_flagged); returns how many rows were left out."""
    engine.read(f"{name}_in", logs, load_contract(LOGS), window)
    engine.view(f"{name}_flagged", S.length_flagged(f"{name}_in", cfg.rules()))
    engine.view(name, f"SELECT * FROM {name}_flagged WHERE NOT too_long")
    n = engine.fetch(f"SELECT CAST(count(1) AS BIGINT) AS n FROM {name}_flagged WHERE too_long", f"{name}_too_long")
    return int(n["n"].iloc[0] or 0)


def training_data(engine, cfg, logs, C: np.ndarray) -> Training:
    """Training rows of the window as statistics (statements.aggregate) and the training contexts' tokens."""
    f, t = _dt.date.fromisoformat(cfg.date_from), _dt.date.fromisoformat(cfg.date_to)
    too_long = read_within_limits(engine, "tr_logs", logs, days(f, t), cfg)
    engine.view("tr_slots", S.slot_rows(C))
    c = engine.fetch(S.slot_counts(), "train_counts").iloc[0]
    read = {"train_events": int(c["events"] or 0), "train_slots": int(c["slots"] or 0),
            "train_slots_without_adc": int(c["no_adc"] or 0), "train_slots_null_reward": int(c["null_reward"] or 0),
            "train_rows_too_long": too_long}
    if not read["train_events"]:
        raise DataCheckFailed(f"no training events in {logs.name} for {cfg.date_from}..{cfg.date_to}", counts=read)
    agg = aggregated(engine.fetch(S.aggregate(), "train_statistics"))
    if not len(agg):
        raise DataCheckFailed(f"no usable training slot (a position with an ADC and a reward) in {cfg.date_from}.."
                              f"{cfg.date_to}", counts={**read, "train_slots_used": 0})
    contexts = engine.fetch(S.contexts("tr_logs"), "train_contexts")
    counts = {"train_events": int(c["events"]), "train_slots": int(c["slots"]), "train_rows_too_long": too_long,
              "train_slots_used": int(agg["n"].sum()), "train_clicks": float(agg["s_r"].sum()),
              "train_slots_without_adc": int(c["no_adc"] or 0),
              "train_slots_null_reward": int(c["null_reward"] or 0),
              "train_slots_without_propensity": int(agg["n_no_propensity"].sum())}
    counts["train_rows_pairs_capped"], counts["train_contexts_pairs_capped"] = \
        capped_rows(contexts, cfg.interactions, cfg.max_pair_keys)
    if counts["train_slots_without_adc"]:
        from ..progress import note

        note(f"{counts['train_slots_without_adc']:,} of {counts['train_slots']:,} training slots sit at positions "
             f"beyond the {len(C)} ADC(s) given and were left out (train_slots_without_adc in result.json): give "
             f"one ADC per logged position to use them")
    return Training(agg, tokens_by_context(contexts, cfg.interactions, cfg.max_pair_keys), counts)


def scoring_window(engine, cfg, logs, eligibility, data: Training) -> Scoring:
    """Relations tr_sc_logs, tr_sc_events, tr_ads, tr_cands (and tr_elig); the scoring contexts and ads."""
    f, t = _dt.date.fromisoformat(cfg.score_from), _dt.date.fromisoformat(cfg.score_to)
    too_long = read_within_limits(engine, "tr_sc_logs", logs, days(f, t), cfg)
    engine.materialize("tr_sc_events", S.score_events())
    n_events = int(engine.fetch("SELECT CAST(count(1) AS BIGINT) AS n FROM tr_sc_events", "score_events")["n"].iloc[0])
    if not n_events:
        raise DataCheckFailed(f"no events to decide for in {cfg.score_from}..{cfg.score_to}")
    contexts = engine.fetch(S.contexts("tr_sc_logs"), "score_contexts").sort_values("ctx_key", kind="mergesort")
    tokens = tokens_by_context(contexts, cfg.interactions, cfg.max_pair_keys)
    contexts = contexts.assign(tokens=[tokens[k] for k in contexts["ctx_key"]]).reset_index(drop=True)
    capped = capped_rows(contexts, cfg.interactions, cfg.max_pair_keys)
    train_ads = sorted(data.agg["ad_id"].unique())
    level = None
    if eligibility is not None:
        level = el.read_eligibility(engine, eligibility)
        elig_ads = sorted(engine.fetch("SELECT DISTINCT ad_id FROM tr_elig", "eligible_ads")["ad_id"])
        ads = pd.DataFrame({"ad_id": elig_ads, "known": [a in set(train_ads) for a in elig_ads]})
    else:
        ads = pd.DataFrame({"ad_id": train_ads, "known": True})
    if not len(ads):
        raise DataCheckFailed(f"no eligible ad in {eligibility.name}: nothing to choose from")
    if int(cfg.m) > len(ads):
        raise DataCheckFailed(f"--m {cfg.m}: only {len(ads)} distinct ads can be chosen from (the training window's"
                              f"{' eligible' if eligibility is not None else ''} ads), fewer than m per event; "
                              f"lower --m to at most {len(ads)}")
    engine.register_frame("tr_ads", ads[["ad_id"]])
    engine.materialize("tr_cands", el.candidates("tr_sc_events", "tr_ads", "tr_elig" if level else None, level))
    return Scoring(contexts, ads, level, n_events, capped, too_long)


def policy_id(name: str, cfg) -> str:
    return f"{name}@{cfg.date_from}..{cfg.date_to}"


def _meta(cfg, method: str, pids: list, C, adc_source: str, counts: dict) -> dict:
    return {"method": method, "policy_id": pids[0], "policy_ids": pids, "m": int(cfg.m), "seed": cfg.seed,
            "adc": [float(c) for c in C], "adc_source": adc_source, "interactions": cfg.interactions,
            "max_pair_keys": int(cfg.max_pair_keys),
            "config": {k: v for k, v in asdict(cfg).items() if k != "extra"}, "counts": counts}


def decide(engine, cfg, method: str, data: Training, sc: Scoring, C, adc_source: str) -> list[dict]:
    """Fit ``method``, save the model under out/model/<method>/, score every (scoring context, ad), and choose per
    event: one dict per policy (policy_id, dedup, relation of per-event choices, learner info, model path)."""
    from ..io import fs

    model_dir = fs.join(cfg.out, "model", method)
    m = int(cfg.m)
    if method == "regression":
        pids, dedups = [policy_id(method, cfg)], [None]
        model = rg.fit_regression(data.agg, data.tokens, rg.RegressionConfig(cfg.reg_param, cfg.max_iter))
        scores = model.score(sc.contexts, sc.ads)
        fs.write_parquet(fs.join(model_dir, "scores", "part-0.parquet"), scores)   # g(x, a) of the window
        sc.scores[pids[0]] = scores
        columns = "s.score"
    else:
        dedups = ["random", "next_best"] if cfg.dedup == "both" else [cfg.dedup]
        pids = [policy_id(method if d == "random" else f"{method}_{d}", cfg) for d in dedups]
        model = cs.fit_cost_sensitive(data.agg, data.tokens, m, cs.CostSensitiveConfig(cfg.reg_param))
        scores = model.score(sc.contexts, sc.ads)
        columns = ", ".join(f"s.score_{k}" for k in range(1, m + 1))
    model.save(model_dir, _meta(cfg, method, pids, C, adc_source, data.counts))
    engine.register_frame(f"tr_scores_{method}", scores.drop(columns=["context_id"]))
    engine.materialize(f"tr_scored_{method}", el.scored("tr_cands", f"tr_scores_{method}", cfg.seed, columns))
    out = []
    for i, (pid, dedup) in enumerate(zip(pids, dedups)):
        name = f"tr_choice_{method}_{i}"
        if dedup is None:
            el.top_m(engine, f"tr_scored_{method}", m, name)
        else:
            el.set_select_test(engine, f"tr_scored_{method}", m, dedup, name)
        out.append({"policy_id": pid, "method": method, "dedup": dedup, "relation": name, "learner": model.info,
                    "model_path": model_dir})
    return out


def write_decisions(engine, cfg, decided: list, n_events: int) -> dict:
    """Decisions and notes written (each dt of the scoring window replaced); per-policy counts and the days."""
    from ..io import fs

    m = int(cfg.m)
    engine.register_frame("tr_pids", pd.DataFrame({"policy_id": [d["policy_id"] for d in decided]}))
    engine.materialize("tr_decided", S.decided_union({d["policy_id"]: d["relation"] for d in decided},
                                                     "tr_sc_events", "tr_cands", "tr_pids"), keep=True)
    window = days(_dt.date.fromisoformat(cfg.score_from), _dt.date.fromisoformat(cfg.score_to))
    dec_path = fs.join(cfg.out, "decisions")
    exprs = {c: c for c in ("policy_id", "event_id", "slots", "dt")}
    engine.write(select_sql(DECISIONS, exprs, "tr_decided"), dec_path, window)
    engine.write(S.notes(m), fs.join(cfg.out, "decision_notes"), window)
    counts = engine.fetch(S.policy_counts(m), "policy_counts").set_index("policy_id")
    dates = engine.fetch("SELECT DISTINCT dt FROM tr_decided", "decision_dates")["dt"]
    policies = {}
    for d in decided:
        st = counts.loc[d["policy_id"]]
        policies[d["policy_id"]] = {
            "method": d["method"], "dedup": d["dedup"], "learner": d["learner"], "model_path": d["model_path"],
            "events_decided": int(st["events"]), "events_with_fewer_than_m_eligible": int(st["short"]),
            "events_without_eligible_ads": n_events - int(st["events"]),
            "fallback_scored_ads_chosen": int(st["fallback"]), "duplicates_replaced": int(st["replaced"])}
    return {"policies": policies, "decisions_path": dec_path,
            "decision_dates": sorted(d.isoformat() for d in dates)}
