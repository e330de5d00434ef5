"""The data set of the `scavenger train` tests (test_policies_train.py, test_policies_train_engines.py), built on DuckDB.

Generator: ranked layout, uniform logging, 20 ads, 12 contexts, K = m = 4, 20k events a day by default (seed 11; a day's rows do
not depend on how many days are generated). Eligibility of the scoring days, event level: 5% of the events get only
2 of the 20 ads, the others each ad with probability 0.6; every event also gets an ad never seen in training.
"""
from __future__ import annotations

import os

import pandas as pd

M = 4
TRAIN = ("2026-01-01", "2026-01-02")
SCORE = ("2026-01-03", "2026-01-03")
NEW_AD = "zz_new_ad"
METHODS = ("regression", "cost_sensitive", "cost_sensitive_next_best")


def _uniform(expr: str) -> str:
    """A uniform in [0, 1) from md5 (DuckDB SQL): the eligibility draws."""
    return f"CAST('0x' || substr(md5({expr}), 1, 8) AS BIGINT) / 4294967296.0"


def make_world(root: str, days: int = 3, events_per_day: int = 20_000) -> dict:
    import duckdb

    from scavenger.simulation.generator import GeneratorConfig, generate

    gen_dir = os.path.join(root, "gen")
    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=4, n_ads=20, n_contexts=12, days=days,
                          events_per_day=events_per_day, seed=11)
    truth = generate("duckdb", cfg, gen_dir)
    elig = os.path.join(root, "eligibility.parquet")
    duckdb.connect().execute(f"""
COPY (WITH ev AS (SELECT event_id, dt FROM read_parquet('{gen_dir}/logs/*/*.parquet', hive_partitioning = true)
                  WHERE dt >= DATE '{SCORE[0]}'),
ads AS (SELECT DISTINCT ad_id FROM read_parquet('{gen_dir}/truth/click_rates/*.parquet')),
grid AS (SELECT event_id, dt, ad_id, {_uniform("'5|' || event_id")} AS ue,
                {_uniform("'6|' || event_id || '|' || ad_id")} AS ua FROM ev CROSS JOIN ads),
few AS (SELECT event_id, dt, ad_id FROM (SELECT *, row_number() OVER (PARTITION BY event_id ORDER BY ua, ad_id) AS r
        FROM grid WHERE ue < 0.05) f WHERE r <= 2)
SELECT event_id, dt, ad_id FROM grid WHERE ue >= 0.05 AND ua < 0.6
UNION ALL SELECT event_id, dt, ad_id FROM few
UNION ALL SELECT event_id, dt, '{NEW_AD}' AS ad_id FROM ev) TO '{elig}' (FORMAT PARQUET)""")
    return {"root": root, "gen": gen_dir, "truth": truth, "elig": elig, "events_per_day": events_per_day}


def config(world: dict, out: str, **kw):
    """Both methods, both dedups, the eligibility table, seed 3, the truth beside the logs; the estimate under
    --gate report: the never-logged NEW_AD fails its check b (8% of the target's mass on rarely logged pairs),
    which --gate enforce would refuse, and the tests judge that estimate against the truth."""
    from scavenger.policies.train import TrainConfig

    return TrainConfig(logs=os.path.join(world["gen"], "logs"), date_from=TRAIN[0], date_to=TRAIN[1],
                       score_from=SCORE[0], score_to=SCORE[1], out=out, method="both", m=M, adc="estimate",
                       eligibility=world["elig"], seed=3, truth="auto", dedup="both", **{"gate": "report", **kw})


def run_duckdb(cfg) -> dict:
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.policies.train import run_training

    engine = DuckDBEngine("test_train")
    try:
        return run_training(engine, cfg)
    finally:
        engine.close()


def pid(method: str) -> str:
    return f"{method}@{TRAIN[0]}..{TRAIN[1]}"


def decisions_frame(path) -> pd.DataFrame:
    """Written decisions as comparable rows (policy_id, event_id, slots as tuples), in a fixed order."""
    d = pd.read_parquet(path)
    d["slots"] = d["slots"].map(lambda x: [(int(s["position"]), s["ad_id"], float(s["probability"])) for s in x])
    return d.sort_values(["policy_id", "event_id"]).reset_index(drop=True)[["policy_id", "event_id", "slots"]]


# Contexts whose keys collided before the key escaped its separators (statements.ctx_key_sql), in pairs of the same
# context_id with opposite rankings: '=', ';', '|', '#', '&' in ids, keys and values, empty strings, null values,
# a null map against an empty one, a null id against an empty one.
HOSTILE_CONTEXTS = [
    ("x", {"b": "c;page=a"}), ("x", {"page": "a", "b": "c"}),          # the reviewer's pair: '#x|b=c;page=a'
    ("x", {"a=b": "c"}), ("x", {"a": "b=c"}),                          # 'a=b=c'
    ("x|a=1", {}), ("x", {"a": "1|"}),                                 # '#x|a=1|'
    ("y", {"a": "b;c="}), ("y", {"a": "b", "c": ""}),                  # 'a=b;c=' (an empty value)
    ("y", {"a": None}), ("y", {"a": ""}),                              # 'a=' (a null value)
    ("z", None), ("z", {}),                                            # '#z|' (a null map)
    (None, {"#k": "#"}), ("", {"#k": "#"}),                            # '|#k=#' and '#|#k=#'
    ("w", {"k": "1&j=2"}), ("w", {"k": "1", "j": "2", "~": "~n"}),     # '&' of the pair tokens, '~' of the escapes
]
HOSTILE_ADS = ["a|1", "page=a", "#x", "b;c", "ad=x|page=a", "z~p"]
HOSTILE_C = (1.0, 0.6, 0.4)


def hostile_ranking(i: int) -> list:
    """Context i's ads, best first: a rotation of HOSTILE_ADS, reversed for odd i (the pair of context 2j)."""
    ads = HOSTILE_ADS[i % len(HOSTILE_ADS):] + HOSTILE_ADS[:i % len(HOSTILE_ADS)]
    return ads[::-1] if i % 2 else ads


def hostile_logs(root: str, days: int = 3) -> str:
    """Every ordered 3 of the 6 ads (120 slates, each ad at each position 20 times, propensity 1/6) once per
    context and day, with the expected reward as the reward (C_k P(x, a), P = 0.9 - 0.15 rank): no noise, so a
    learner that keeps the contexts apart picks each context's true top 3 exactly. Event ids end with '/<i>'."""
    import datetime as dt
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    from scavenger.contract import arrow_schema

    slates = list(itertools.permutations(HOSTILE_ADS, 3))
    for d in range(days):
        day = dt.date(2026, 1, 1) + dt.timedelta(days=d)
        rows = []
        for i, (cid, ctx) in enumerate(HOSTILE_CONTEXTS):
            rank = {a: r for r, a in enumerate(hostile_ranking(i))}
            for e, slate in enumerate(slates):
                slots = [{"position": k + 1, "ad_id": a, "propensity": 1 / len(HOSTILE_ADS),
                          "reward": HOSTILE_C[k] * (0.9 - 0.15 * rank[a])} for k, a in enumerate(slate)]
                rows.append({"event_id": f"e{d}-{e}/{i}", "event_time": dt.datetime(day.year, day.month, day.day),
                             "context_id": cid, "context": None if ctx is None else list(ctx.items()),
                             "logging_policy": "lp", "slots": slots, "slate_reward": None})
        schema = arrow_schema("impression_log", nullable=True)
        table = pa.Table.from_pylist(rows, schema=pa.schema([f for f in schema if f.name != "dt"]))
        os.makedirs(f"{root}/logs/dt={day}", exist_ok=True)
        pq.write_table(table, f"{root}/logs/dt={day}/part-0.parquet")
    return f"{root}/logs"
