"""A plain-Python reference of the one pass: row rules, then every statistics table, row by row.

The statistics tests compare the engines' tables with these (1e-9 relative). Conventions (statistics/sql): a row
contributes through the positions it holds; Y_k = pi_k(a_k)/mu_k(a_k) for a held position, 1 for one it does not
hold; K = the largest position of a clean row; an event whose held slot lacks a propensity is "missing".
"""
from __future__ import annotations

import datetime as dt
import math
import sys
import random
from collections import defaultdict

import numpy as np
import pyarrow as pa

from scavenger.estimators.slate import SlateMoments


# ---- random logs built directly (random K, string ad ids, missing days, several policies) ---------------------
def build_random(seed: int, K: int | None = None, n_ads: int | None = None, days=(0, 1, 3), per_day: int = 60,
                 logging_policies=("lp_a", "lp_b"), with_nulls: bool = True, odd_shapes: bool = False):
    """``odd_shapes``: some logged slates hold a subset of the positions, or an extra slot at K + 1."""
    rng = random.Random(seed)
    K = K or rng.randint(1, 4)
    n_ads = n_ads or rng.randint(K + 1, K + 5)
    ads = [f"{rng.choice('qwxyz')}{rng.randrange(10**6)}-{i}" for i in range(n_ads)]
    logs, decs = [], []
    for d in days:
        day = dt.date(2026, 3, 1) + dt.timedelta(days=d)
        for e in range(per_day):
            eid = f"ev{seed}-{d}-{e}"
            lp = rng.choice(logging_policies)
            slate = rng.sample(ads, K)
            slots = []
            for i, a in enumerate(slate):
                prop = None if (with_nulls and rng.random() < 0.03) else rng.choice([0.25, 0.5, 1.0, rng.uniform(0.05, 1)])
                rew = None if (with_nulls and rng.random() < 0.03) else float(rng.random() < 0.35)
                slots.append({"position": i + 1, "ad_id": a, "propensity": prop, "reward": rew})
            if odd_shapes and rng.random() < 0.3:
                if K > 1 and rng.random() < 0.6:
                    del slots[rng.randrange(K)]
                else:
                    slots.append({"position": K + 1, "ad_id": rng.choice([a for a in ads if a not in slate] or ads),
                                  "propensity": 0.5, "reward": float(rng.random() < 0.5)})
            rng.shuffle(slots)  # slot order in the array must not matter
            slate_reward = round(rng.uniform(0, K), 3) if rng.random() < 0.1 else None
            logs.append({"event_id": eid, "event_time": dt.datetime(day.year, day.month, day.day, 12),
                         "context_id": f"c{rng.randrange(3)}", "context": {"f": "v"}, "logging_policy": lp,
                         "slots": slots, "slate_reward": slate_reward, "dt": day})
            tgt = slate if rng.random() < 0.5 else rng.sample(ads, K)
            decs.append({"policy_id": "det", "event_id": eid, "dt": day, "base_policy": rng.choice(logging_policies),
                         "slots": [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(tgt)]})
            perm = slate[:]
            rng.shuffle(perm)
            decs.append({"policy_id": "perm", "event_id": eid, "dt": day, "base_policy": None,
                         "slots": [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(perm)]})
            sto = []
            for i in range(K):
                pair = rng.sample(ads, 2)
                p = rng.uniform(0.1, 0.9)
                sto += [{"position": i + 1, "ad_id": pair[0], "probability": p},
                        {"position": i + 1, "ad_id": pair[1], "probability": 1 - p}]
            decs.append({"policy_id": "sto", "event_id": eid, "dt": day, "base_policy": None, "slots": sto})
            dup = [dict(x) for x in sto]
            dup[0]["probability"] /= 2
            dup.insert(1, dict(dup[0]))
            decs.append({"policy_id": "dup", "event_id": eid, "dt": day, "base_policy": None, "slots": dup})
            det0 = [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(tgt)]
            det0.append({"position": 1, "ad_id": rng.choice(ads), "probability": 0.0})
            decs.append({"policy_id": "det0", "event_id": eid, "dt": day, "base_policy": None, "slots": det0})
    return {"K": K, "ads": ads, "logs": logs, "decisions": decs}


def joined(a: dict, b: dict) -> dict:
    """Two build_random sets of different days (and K) as one set over a's ads: b's ads renamed to a's, those beyond
    a's count keeping their names; K is the larger."""
    names = dict(zip(b["ads"], a["ads"] + b["ads"][len(a["ads"]):]))
    for row in b["logs"] + b["decisions"]:
        for s in row["slots"]:
            s["ad_id"] = names[s["ad_id"]]
    return {"K": max(a["K"], b["K"]), "ads": a["ads"], "logs": a["logs"] + b["logs"],
            "decisions": a["decisions"] + b["decisions"]}


def with_hostile_ads(seed: int = 2, per_day: int = 80):
    """K = 2 over six ads whose ids hold the slate key's separators and markers ('x|2:y' at 1 with 'z' at 2, and
    'x' at 1 with 'y|2:z' at 2, were one key unescaped; an ad named '~n' or '<none>'); the first two events show
    those two slates."""
    data = build_random(seed=seed, K=2, n_ads=6, days=(0,), per_day=per_day, with_nulls=False)
    hostile = dict(zip(data["ads"], ["x|2:y", "z", "x", "y|2:z", "~n", "<none>"]))
    for row in data["logs"] + data["decisions"]:
        for s in row["slots"]:
            s["ad_id"] = hostile[s["ad_id"]]
    for ev, ads in zip(data["logs"][:2], (["x|2:y", "z"], ["x", "y|2:z"])):
        ev["slots"] = [dict(s, position=k + 1, ad_id=a) for k, (s, a) in enumerate(zip(ev["slots"], ads))]
    data["ads"] = list(hostile.values())
    return data


def with_unknown_slot_rewards(data, share: float = 0.3, seed: int = 0):
    """A ``share`` of the events whose slot rewards are all known get a slate_reward (their sum) and lose each slot
    reward with probability 1/2 (null): allowed by the contract (MISSING_REWARD only when slate_reward is null too),
    those slots' rewards are unknown."""
    rng = random.Random(seed)
    for ev in data["logs"]:
        if ev["slots"] and all(s["reward"] is not None for s in ev["slots"]) and rng.random() < share:
            ev["slate_reward"] = float(sum(s["reward"] for s in ev["slots"]))
            for s in ev["slots"]:
                s["reward"] = None if rng.random() < 0.5 else s["reward"]
    return data


def with_long_rows(seed: int, share: float, longest: int = 9):
    """Random K = 3 logs where a share of the rows also hold slots up to ``longest`` (some with a gap, in any order),
    and a policy whose decisions list every position 1..longest (so the extra positions have target mass)."""
    data = build_random(seed=seed, K=3, n_ads=14, days=(0, 1), per_day=70, odd_shapes=True)
    rng = random.Random(seed)
    ads = data["ads"]
    by_id = {ev["event_id"]: ev for ev in data["logs"]}
    for ev in data["logs"]:
        if rng.random() < share and len(ev["slots"]) >= 2:
            used = {s["ad_id"] for s in ev["slots"]}
            free = [a for a in ads if a not in used]
            for pos in range(5, longest + 1):
                if rng.random() < 0.8 and free:
                    a = free.pop(rng.randrange(len(free)))
                    ev["slots"].append({"position": pos, "ad_id": a, "propensity": rng.choice([0.25, 0.5]),
                                        "reward": float(rng.random() < 0.4)})
            rng.shuffle(ev["slots"])
    for eid, ev in by_id.items():
        logged = {s["position"]: s["ad_id"] for s in ev["slots"]}
        slots = []
        for pos in range(1, longest + 1):
            a = logged.get(pos, rng.choice(ads))
            b = rng.choice([x for x in ads if x != a])
            p = rng.choice([0.5, 1.0])
            slots += [{"position": pos, "ad_id": a, "probability": p}]
            if p < 1:
                slots += [{"position": pos, "ad_id": b, "probability": 1 - p}]
        data["decisions"].append({"policy_id": "wide", "event_id": eid, "dt": ev["dt"], "base_policy": None,
                                  "slots": slots})
    return data


def arrow_tables(data):
    """The logs and decisions as pyarrow tables of the contracts (an in-memory source for DuckDB)."""
    from scavenger.contract import arrow_schema

    L = pa.Table.from_pylist(data["logs"], schema=arrow_schema("impression_log", nullable=True))
    D = pa.Table.from_pylist(data["decisions"], schema=arrow_schema("decisions", nullable=True))
    return L, D


def write_parquet(data, root, days=None):
    """The data set as Parquet partitioned by dt under root/logs and root/decisions (pyarrow, no Spark)."""
    import pyarrow.parquet as pq

    L, D = arrow_tables(data)
    for name, table in (("logs", L), ("decisions", D)):
        for day in sorted({r["dt"] for r in data["logs"]}):
            if days is not None and day not in days:
                continue
            part = table.filter(pa.compute.equal(table["dt"], pa.scalar(day))).drop(["dt"])
            path = f"{root}/{name}/dt={day.isoformat()}"
            import os

            os.makedirs(path, exist_ok=True)
            pq.write_table(part, f"{path}/part-0.parquet")
    return f"{root}/logs", f"{root}/decisions"


# ---- the rules in Python ----------------------------------------------------------------------------------------
def log_reasons(ev, rmin=0.0, rmax=1.0, max_slots=64, max_id_length=1000) -> set:
    s = ev["slots"] or []
    n = len(s)
    out = set()
    if not s:
        out.add("EMPTY_SLATE")
    if n > max_slots:
        out.add("SLATE_TOO_LONG")
    ids = [ev.get("event_id"), ev.get("logging_policy"), ev.get("context_id")] + [x["ad_id"] for x in s]
    if any(v is not None and len(v) > max_id_length for v in ids):       # len: characters, as both engines count
        out.add("ID_TOO_LONG")
    props = [x["propensity"] for x in s if x["propensity"] is not None]
    if any(x["ad_id"] is None for x in s):
        out.add("NULL_AD")
    if props and min(props) < sys.float_info.min:       # zero, negative or subnormal (1/mu overflows)
        out.add("ZERO_PROPENSITY")
    if props and (max(props) > 1 or any(math.isnan(p) for p in props)):
        out.add("PROPENSITY_GT_1")
    ads = [x["ad_id"] for x in s if x["ad_id"] is not None]
    if len(set(ads)) < len(ads):
        out.add("DUPLICATE_AD")
    pos = [x["position"] for x in s if x["position"] is not None]
    if len(set(pos)) < len(pos):
        out.add("DUPLICATE_POSITION")
    if any(x["position"] is None or x["position"] < 1 or x["position"] > max_slots for x in s):
        out.add("POSITION_GAP")
    rewards = [x["reward"] for x in s if x["reward"] is not None]
    sr = ev["slate_reward"]
    fin = lambda v: v is not None and math.isfinite(v)  # noqa: E731
    if any(not math.isfinite(r) for r in rewards) or (sr is not None and not math.isfinite(sr)):
        out.add("REWARD_NOT_FINITE")
    if any(fin(r) and (r < rmin or r > rmax) for r in rewards) or (fin(sr) and (sr < rmin * n or sr > rmax * n)):
        out.add("REWARD_OUT_OF_RANGE")
    if sr is None and any(x["reward"] is None for x in s):
        out.add("MISSING_REWARD")
    ctx = ev.get("context")
    keys = [k for k, _ in ctx] if isinstance(ctx, (list, tuple)) else []     # a dict cannot repeat a key
    if len(set(keys)) < len(keys):
        out.add("CONTEXT_DUPLICATE_KEY")
    entries = ctx.items() if isinstance(ctx, dict) else (ctx or [])
    if any(v is not None and len(v) > max_id_length for kv in entries for v in kv):
        out.add("CONTEXT_TOO_LONG")
    return out


def clean(data) -> tuple[list, list]:
    """(clean events, decisions of clean events) under the default rules (no duplicate ids in these data)."""
    events = [ev for ev in data["logs"] if not log_reasons(ev)]
    ids = {ev["event_id"] for ev in events}
    return events, [d for d in data["decisions"] if d["event_id"] in ids]


def slate_r(ev):
    if ev["slate_reward"] is not None:
        return ev["slate_reward"]
    return sum(s["reward"] or 0.0 for s in ev["slots"])


def key_ad(ad) -> str:
    """An ad id in a slate key: '~' -> '~~', '|' -> '~p' (ids holding neither are kept as they are)."""
    return ad.replace("~", "~~").replace("|", "~p") if ("|" in ad or "~" in ad) else ad


def lkey(slots) -> str:
    return "|".join(f"{s['position']}:{key_ad(s['ad_id'])}" for s in sorted(slots, key=lambda x: x["position"]))


def held(slots) -> str:
    return ",".join(str(p) for p in sorted(s["position"] for s in slots))


def _target(d, k):
    """The deterministic target's ad at k (None when it shows none)."""
    ads = [x["ad_id"] for x in d["slots"] if x["position"] == k and x["probability"] > 0]
    return ads[0] if ads else None


def ref_tables(data):
    """Every statistics table summed over the window, row by row over the clean rows."""
    events, decisions = clean(data)
    K = max(s["position"] for ev in events for s in ev["slots"])
    ref = {"K": K, "n_clean": len(events)}
    ls, ap = defaultdict(lambda: defaultdict(float)), defaultdict(lambda: np.zeros(4))
    for ev in events:
        r = slate_r(ev)
        g = ls[ev["logging_policy"]]
        g["n_events"] += 1
        g["n_slots"] += len(ev["slots"])
        g["s_r"] += r
        g["s_r2"] += r * r
        g["n_missing_propensity"] += any(s["propensity"] is None for s in ev["slots"])
        g["n_null_reward"] += sum(s["reward"] is None for s in ev["slots"])
        g["n_partial"] += held(ev["slots"]) != ",".join(str(k) for k in range(1, K + 1))
        g["k_max"] = max(g.get("k_max", 0), max(s["position"] for s in ev["slots"]))
        g["r_max"] = max(g.get("r_max", -math.inf), r)
        g["r_min"] = min(g.get("r_min", math.inf), r)
        for s in ev["slots"]:   # m, m_r (a known reward), c, c2 (over the known rewards)
            x = s["reward"] or 0.0
            ap[(ev["logging_policy"], s["ad_id"], s["position"])] += [1, s["reward"] is not None, x, x * x]
    ref["log_summary"], ref["ad_position"] = ls, ap
    by_id = {ev["event_id"]: ev for ev in events}
    pe, fac, fsq = defaultdict(lambda: np.zeros(5)), defaultdict(lambda: np.zeros(2)), defaultdict(float)
    tp, base, tg = defaultdict(float), defaultdict(lambda: np.zeros(4)), defaultdict(lambda: np.zeros(4))
    covered = defaultdict(int)     # slate_covered: T_a of the logged slates among each policy's decided events
    Ys = defaultdict(lambda: ([], []))
    for d in decisions:
        ev = by_id[d["event_id"]]
        r = slate_r(ev)
        p = d["policy_id"]
        det = all(x["probability"] in (0.0, 1.0) for x in d["slots"])
        # a re-ordering of the logged slate: its ads of positive probability are the logged ones (at random too)
        reorder = sorted({x["ad_id"] for x in d["slots"] if x["probability"] > 0}) == \
            sorted(s["ad_id"] for s in ev["slots"])
        partial = held(ev["slots"]) != ",".join(str(k) for k in range(1, K + 1))
        pe[p] += [1, det, d["base_policy"] is not None, reorder, partial]
        covered[(p, held(ev["slots"]), lkey(ev["slots"]))] += 1
        if d["base_policy"] is not None:
            m = d["base_policy"] == ev["logging_policy"]
            base[(p, d["base_policy"])] += [1, m, m * r, m * r * r]
        for x in d["slots"]:
            if x["probability"] > 0:
                tp[(p, ev["logging_policy"], x["ad_id"], x["position"])] += x["probability"]
        if det:
            hs = held(ev["slots"])
            tk = "|".join(f"{s['position']}:{key_ad(t) if (t := _target(d, s['position'])) is not None else '~n'}"
                          for s in sorted(ev["slots"], key=lambda x: x["position"]))
            m = tk == lkey(ev["slots"])
            tg[(p, hs, tk)] += [1, m, m * r, m * r * r]
        for s in ev["slots"]:
            rew = s["reward"] or 0.0
            if rew == 0:
                continue
            # the target's entries for the slot's ad at positions the row holds (the value per logged event)
            hits = [x for x in d["slots"] if x["ad_id"] == s["ad_id"] and x["probability"] > 0
                    and x["position"] in {h["position"] for h in ev["slots"]}]
            for x in hits:
                fac[(p, s["ad_id"], s["position"], x["position"])] += [rew * x["probability"],
                                                                       rew * rew * x["probability"]]
                for y in hits:
                    fsq[(p, s["ad_id"], s["position"], x["position"], y["position"])] += \
                        rew * rew * x["probability"] * y["probability"]
        Y = []
        for k in range(1, K + 1):
            at_k = [s for s in ev["slots"] if s["position"] == k]
            if not at_k:       # a position the row does not hold: Y_k = 1
                Y.append(1.0)
                continue
            s = at_k[0]
            pik = sum(x["probability"] for x in d["slots"] if x["position"] == k and x["ad_id"] == s["ad_id"])
            Y.append(pik / s["propensity"] if s["propensity"] is not None else np.nan)
        Ys[(p, ev["logging_policy"])][0].append(r)
        Ys[(p, ev["logging_policy"])][1].append(Y)
    ref.update(policy_events=pe, factored=fac, factored_sq=fsq, target_placements=tp, base_targets=base,
               slate_targets=tg, slate_covered=covered)
    ref["slate_moments"] = {k: SlateMoments.from_arrays(np.array(v[0]), np.array(v[1]).reshape(-1, K))
                            for k, v in Ys.items()}
    return ref


def with_bad_rows(data):
    """The data set plus one bad row per log reason and per decision reason (several for ID_TOO_LONG and
    CONTEXT_TOO_LONG: one per column), and two clean edges: an event at 23:59:59.7 of its day and one whose ids
    and context texts are 1,000 characters of two or three bytes each. Returns (data, {reason: rows expected})."""
    import copy

    data = copy.deepcopy(data)
    logs, decs = data["logs"], data["decisions"]
    good = next(ev for ev in logs if not log_reasons(ev))
    day = good["dt"]
    expected = {}

    def add(reason, **change):
        ev = copy.deepcopy(good)
        ev["event_id"] = f"bad-{reason}-{len(logs)}"
        ev.update(change)
        logs.append(ev)
        expected[reason] = expected.get(reason, 0) + 1
        return ev

    slots = good["slots"]
    add("NULL_EVENT_ID", event_id=None)
    logs[-1]["event_id"] = None
    add("NULL_LOGGING_POLICY", logging_policy=None)
    add("EMPTY_SLATE", slots=[], slate_reward=None)
    add("NULL_AD", slots=[dict(slots[0], ad_id=None)] + slots[1:])
    add("ZERO_PROPENSITY", slots=[dict(slots[0], propensity=0.0)] + slots[1:])
    add("PROPENSITY_GT_1", slots=[dict(slots[0], propensity=1.5)] + slots[1:])
    if len(slots) > 1:
        add("DUPLICATE_AD", slots=[slots[0], dict(slots[1], ad_id=slots[0]["ad_id"])] + slots[2:])
        add("DUPLICATE_POSITION", slots=[slots[0], dict(slots[1], position=slots[0]["position"])] + slots[2:])
    add("POSITION_GAP", slots=[dict(slots[0], position=0)] + slots[1:])
    add("REWARD_NOT_FINITE", slots=[dict(slots[0], reward=float("nan"))] + slots[1:])
    add("REWARD_OUT_OF_RANGE", slots=[dict(slots[0], reward=2.0)] + slots[1:])
    add("MISSING_REWARD", slots=[dict(slots[0], reward=None)] + slots[1:], slate_reward=None)
    add("EVENT_TIME_UNPARSEABLE", event_time=None)
    next_day = dt.datetime(day.year, day.month, day.day) + dt.timedelta(days=1, seconds=5)
    bad_time = add("EVENT_TIME_OUTSIDE_DT", event_time=next_day)
    # ids and context texts of 1,001 characters (two or three bytes each: the limit counts characters on both
    # engines); the same lengths at 1,000 characters are valid (the row "long-but-clean")
    add("ID_TOO_LONG", slots=[dict(slots[0], ad_id="\u00e9" * 1001)] + slots[1:])
    add("ID_TOO_LONG", logging_policy="\u4e2d" * 1001)
    add("ID_TOO_LONG", context_id="c" * 1001)
    ev = add("ID_TOO_LONG")
    ev["event_id"] = "x" * 1001
    add("CONTEXT_TOO_LONG", context={"f": "\u00e9" * 1001})
    add("CONTEXT_TOO_LONG", context={"\u4e2d" * 1001: "v"})
    edge = copy.deepcopy(good)
    edge.update(event_id="long-but-clean" + "\u4e2d" * 986, context_id="\u00e9" * 1000,
                context={"\u00e9" * 1000: "\u4e2d" * 1000},
                slots=[dict(slots[0], ad_id="\u4e2d" * 1000)] + slots[1:])
    logs.append(edge)
    late = copy.deepcopy(good)
    late["event_id"] = "late-but-clean"
    late["event_time"] = dt.datetime(day.year, day.month, day.day, 23, 59, 59, 700000)
    logs.append(late)
    dup = copy.deepcopy(good)
    logs.append(dup)                        # a second copy of a logged event: DUPLICATE_EVENT_ID (keep_first)
    expected["DUPLICATE_EVENT_ID"] = 1
    dec = next(d for d in decs if d["event_id"] == good["event_id"])
    dexp = {}

    def dadd(reason, **change):
        d = copy.deepcopy(dec)
        d.update(change)
        decs.append(d)
        dexp[reason] = dexp.get(reason, 0) + 1

    dadd("NULL_POLICY_ID", policy_id=None)
    dadd("EMPTY_SLOTS", slots=[], policy_id="p_empty")
    dadd("PROBABILITY_OUT_OF_RANGE", slots=[dict(dec["slots"][0], probability=1.5)] + dec["slots"][1:],
         policy_id="p_range")
    dadd("BAD_POSITION", slots=[dict(dec["slots"][0], position=0)] + dec["slots"][1:], policy_id="p_pos")
    dadd("PROBABILITY_SUM", slots=[dict(dec["slots"][0], probability=0.5)] + dec["slots"][1:], policy_id="p_sum")
    dadd("ID_TOO_LONG", policy_id="p" * 1001)
    dadd("ID_TOO_LONG", slots=[dict(dec["slots"][0], ad_id="\u00e9" * 1001)] + dec["slots"][1:], policy_id="p_long")
    dadd("ID_TOO_LONG", base_policy="\u4e2d" * 1001, policy_id="p_base")
    dadd("DUPLICATE_DECISION")
    dadd("UNKNOWN_EVENT", event_id="no-such-event", policy_id="p_unknown")
    dadd("EVENT_QUARANTINED", event_id=bad_time["event_id"], policy_id="p_q")
    return data, expected, dexp
