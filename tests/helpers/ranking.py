"""References of the ranking family's tests (tests/test_estimators_ranking.py): Open Bandit Pipeline's formulas in
plain numpy over flat rows (copied from /work/scratch/obp_ranking_spec.md), per-event arrays of reference logs, and
the one pass run up to scv_joined on an engine that keeps its relations."""
from __future__ import annotations

import hashlib
import math
from collections import defaultdict

import numpy as np
from scavenger.estimators import ranking_sums as RS

from helpers.reference import clean


def obp_values(held, mu, pi, r, q_logged=None, e_pi=None) -> dict:
    """obp 0.5's estimates with every event a slate (n = events) and its usable slots as rows: SIPS-free, rows at
    position p = the slots with a propensity and a known reward (IIPS), those whose prefix 1..p has every
    propensity (RIPS); Cascade-DR (spec section 3) generalized to partial prefixes (a term at k needs 1..k)."""
    n, K = held.shape
    prop = held & np.isfinite(mu)
    out = {}
    ratio = np.where(prop, pi / np.where(prop, mu, 1.0), 1.0)
    cascade = np.cumprod(ratio, axis=1)
    g = np.cumprod(prop, axis=1).astype(bool)
    for name, use, weight in (("iips", prop & np.isfinite(r), ratio), ("rips", g & np.isfinite(r), cascade)):
        slate, position = np.nonzero(use)
        iw, reward = weight[slate, position], r[slate, position]
        out[f"slate_{name}"] = (reward * iw).sum() / n          # estimated_rewards.sum() / n
        est = np.zeros_like(iw)
        with np.errstate(invalid="ignore", divide="ignore"):
            for p in range(K):                                  # the self-normalized classes' loop
                idx = position == p
                if idx.any():
                    est[idx] = reward[idx] * iw[idx] / iw[idx].mean()
        out[f"slate_sn{name}"] = est.sum() / n
    if q_logged is not None:
        prev = np.column_stack([np.ones(n), cascade[:, :-1]])
        rew = np.where(g & np.isfinite(r), r, 0.0)
        term = np.where(g, cascade * (rew - q_logged) + prev * e_pi, 0.0)     # iw (r - q) + iw_prev E_pi q
        out["slate_cascade_dr"] = term.sum() / n
    return out


def random_events(rng, n: int, K: int) -> tuple:
    """(held, mu, pi, r, q_logged, e_pi): partial slates (position 1 missing now and then), missing propensities,
    unknown rewards, a target that often shows another ad (pi = 0)."""
    held = rng.random((n, K)) < 0.85
    mu = np.where(rng.random((n, K)) < 0.95, rng.uniform(0.05, 1.0, (n, K)), np.nan)
    pi = np.where(rng.random((n, K)) < 0.6, rng.uniform(0.0, 1.0, (n, K)), 0.0)
    r = np.where(rng.random((n, K)) < 0.95, rng.binomial(1, 0.3, (n, K)).astype(float), np.nan)
    return held, mu, pi, r, rng.uniform(0, 2, (n, K)), rng.uniform(0, 2, (n, K))


def fold_of(event_id: str) -> int:
    return 1 if hashlib.md5(event_id.encode()).hexdigest()[15] in "13579bdf" else 0


def reference_sums(data, q) -> tuple[dict, dict]:
    """{(policy, dt, logging_policy, fold): long sums} and the Cascade-DR ones, from the clean rows of a
    helpers.reference data set and the q table (ranking.reward_model; NaN ad: the position's default)."""
    events, decisions = clean(data)
    by_id = {ev["event_id"]: ev for ev in events}
    K = max(s["position"] for ev in events for s in ev["slots"])
    table = {(str(r.dt), int(r.fold), int(r.position), r.ad_id): float(r.q) for r in q.itertuples()
             if isinstance(r.ad_id, str)}
    default = {(str(r.dt), int(r.fold), int(r.position)): float(r.q) for r in q.itertuples()
               if not isinstance(r.ad_id, str)}
    groups = defaultdict(list)
    for d in decisions:
        ev = by_id[d["event_id"]]
        groups[(d["policy_id"], ev["dt"].isoformat(), ev["logging_policy"], fold_of(ev["event_id"]))].append((ev, d))
    sums, dr = {}, {}
    for key, rows in groups.items():
        n = len(rows)
        held, mu, pi, r = np.zeros((n, K), bool), *(np.full((n, K), np.nan) for _ in range(3))
        ql, ep = np.zeros((n, K)), np.zeros((n, K))
        for i, (ev, d) in enumerate(rows):
            day, f = ev["dt"].isoformat(), fold_of(ev["event_id"])

            def qv(k, ad, day=day, f=f):
                return table.get((day, f, k, ad), default.get((day, f, k), 0.0))
            for s in ev["slots"]:
                k = s["position"] - 1
                held[i, k] = True
                mu[i, k] = math.nan if s["propensity"] is None else s["propensity"]
                r[i, k] = math.nan if s["reward"] is None else s["reward"]
                pi[i, k] = sum(x["probability"] for x in d["slots"]
                               if x["position"] == k + 1 and x["ad_id"] == s["ad_id"])
                ql[i, k] = qv(k + 1, s["ad_id"])
            for k in range(K):
                ep[i, k] = sum(x["probability"] * qv(k + 1, x["ad_id"]) for x in d["slots"]
                               if x["position"] == k + 1 and x["probability"] > 0)
        sums[key] = RS.sums_from_events(held, mu, pi, r)
        dr[key] = RS.dr_sums_from_events(held, mu, pi, r, ql, ep)
    return sums, dr


def scan_to_joined(engine_cls, root: str, spark=None):
    """The one pass over root/logs, root/decisions on an engine whose relations outlive it (release and drop do
    nothing), scv_joined made again with the slot rewards. Returns (engine, scan result)."""
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig, scan_days
    from scavenger.statistics.sql import decisions as D

    class Keep(engine_cls):
        def release(self):
            pass

        def drop(self, names):
            pass

    eng = Keep(spark, "test") if spark is not None else Keep("test")
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    res = scan_days(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(), StatsConfig())
    eng.materialize("scv_joined", D.joined(StatsConfig().rules, res.K, res.Kw, rewards=True))
    return eng, res


def ranking_tables(eng, Kw: int):
    """(reward_to_go rows, q table, long ranking sums, long Cascade-DR sums) of the kept pass."""
    from scavenger.estimators.ranking import reward_model
    from scavenger.statistics.sql import ranking_tables as RT

    rtg = eng.fetch(RT.reward_to_go(Kw))
    q = reward_model(rtg)
    eng.register_frame("scv_q", q)
    sums, dr = RS.to_long(eng.fetch(RT.ranking_sums(Kw))), RS.to_long(eng.fetch(RT.cascade_dr(Kw)), dr=True)
    for t in (sums, dr):
        t["dt"] = t["dt"].astype(str)
    return rtg, q, sums, dr
