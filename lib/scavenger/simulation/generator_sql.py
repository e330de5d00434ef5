"""The generator's statements, in Spark SQL: Spark runs them as they are, DuckDB as sqlglot writes them.

``events_sql`` builds the events of some days from a range of row numbers (IDS): the world's arrays bound once from
a one-row relation (WORLD: ``from_json`` of one JSON literal per array; scalar subqueries, evaluated once), the
row's hash key and its uniforms (``hashing.py``, as stages), then the sampling steps (``sampling.py``). A row
depends only on (seed, day, index): never on the engine, the partitioning or how days are grouped.
``logs_sql``/``decisions_sql`` project those events onto the contracts; the count statements read written logs.
"""
from __future__ import annotations

import json

import numpy as np

from ..contract import DECISIONS, LOGS, select_sql
from . import hashing as H
from .sampling import Sampling, arr, at, context_slots, draws
from .world import World

EVENTS = "_gen_events"     # the relation the log and decision statements read
WORLD = "_gen_world"       # one row: the world's arrays
IDS = "_gen_ids"           # the row numbers of the days being written
_SLOT = "position:int,ad_id:string,probability:double"


def world_columns(world: World) -> list[str]:
    """``from_json('<json>', '<type>') AS _w_*``: the world's arrays as constants. Doubles round-trip exactly
    through repr-based JSON (Spark's Jackson and DuckDB's yyjson parse them correctly rounded)."""
    n, K = world.cfg.n_contexts, world.cfg.n_positions
    exploit = [(b.exploit.reshape(-1) if b.exploit is not None else np.full(n * K, -1)).astype(int).tolist()
               for b in world.bases]
    best = world.best_base if world.best_base is not None else np.zeros(n, dtype=np.int64)
    values = {
        "_w_p": (world.P.reshape(-1).astype(float).tolist(), "array<double>"),
        "_w_alias_prob": (world.alias_prob.astype(float).tolist(), "array<double>"),
        "_w_alias_idx": (world.alias_idx.astype(int).tolist(), "array<int>"),
        "_w_ad_names": (list(world.pools.names), "array<string>"),
        "_w_ctx_names": (list(world.ctx_names), "array<string>"),
        "_w_ctx_maps": ([dict(f) for f in world.ctx_features], "array<map<string,string>>"),
        "_w_exploit": (exploit, "array<array<int>>"),
        "_w_oracle": (world.oracle.reshape(-1).astype(int).tolist(), "array<int>"),
        "_w_most_clicked": (world.most_clicked.reshape(-1).astype(int).tolist(), "array<int>"),
        "_w_best_base": (best.astype(int).tolist(), "array<int>"),
        **{name: (slots, f"array<array<struct<{_SLOT}>>>") for name, slots in context_slots(world).items()},
    }
    out = []
    for name, (value, typ) in values.items():
        text = json.dumps(value, separators=(",", ":"))
        if "'" in text or "\\" in text:   # a SQL string literal: names never hold quotes or escapes
            raise ValueError(f"world column {name} holds a quote or a backslash")
        out.append(f"from_json('{text}', '{typ}') AS {name}")
    return out


def _hash_stages(world: World) -> list[tuple[str, list[str]]]:
    """(name, added columns) of the hash stages: the row key (two lanes, two mixes each), then every draw."""
    seed = world.cfg.seed
    s1, s2 = H.seed_keys(seed)
    lanes = ((0, "_r1", s1), (1, "_r2", s2))
    stages = [
        ("_h1", [f"{H.step_a(f'_idx ^ {s}', L)} AS {r}a" for L, r, s in lanes]),
        ("_h2", [f"{H.step_b(f'{r}a', L)} AS {r}b" for L, r, s in lanes]),
        ("_h3", [f"{H.step_a(H.fin(f'{r}b', L) + ' ^ _day', L)} AS {r}c" for L, r, s in lanes]),
        ("_h4", [f"{H.step_b(f'{r}c', L)} AS {r}d" for L, r, s in lanes]),
        ("_h5", [f"{H.fin(f'{r}d', L)} AS {r}" for L, r, s in lanes]),
    ]
    first, second, final = [], [], []
    for column, stream, count in draws(world):
        units = []
        for j in range(count or 1):
            name = f"{column}_{j}"
            c = H.stream_keys(seed, stream, j)
            for L, r, _ in lanes:
                first.append(f"{H.step_a(f'{r} ^ {c[L]}', L)} AS {name}_{L}a")
                second.append(f"{H.step_b(f'{name}_{L}a', L)} AS {name}_{L}b")
            units.append(H.to_unit(H.fin(f"{name}_0b", 0), H.fin(f"{name}_1b", 1)))
        final.append(f"{units[0] if count is None else 'array(' + ', '.join(units) + ')'} AS {column}")
    return stages + [("_h6", first), ("_h7", second), ("_h8", final)]


def world_sql(world: World) -> str:
    """Relation WORLD: one row, the world's arrays (``world_columns``)."""
    return "SELECT " + ", ".join(world_columns(world))


def ids_sql(world: World, first_day: int, n_days: int) -> str:
    """Relation IDS: the row numbers of days first_day .. first_day + n_days - 1 (day * events_per_day + index)."""
    epd = int(world.cfg.events_per_day)
    return f"SELECT id FROM range({int(first_day) * epd}, {(int(first_day) + int(n_days)) * epd}) AS _ids(id)"


def events_sql(world: World) -> str:
    """Events of the rows of IDS with their sampling columns (_day, _idx, _c, _slates, _chosen, _slate, _urand)
    and the world columns, taken from WORLD by scalar subqueries: both engines evaluate those once per statement
    and every row references the same arrays. The text depends on the config only, not on the days or the
    world's arrays, so DuckDB translates it once for every day of a history-mode run."""
    cfg = world.cfg
    epd = int(cfg.events_per_day)
    s = Sampling(world)
    names = [c.rsplit(" AS ", 1)[1] for c in world_columns(world)]
    bound = ", ".join(f"(SELECT {c} FROM {WORLD}) AS {c}" for c in names)
    ctes = [("_h0", f"SELECT CAST(id DIV {epd} AS INT) AS _day, CAST(id % {epd} AS BIGINT) AS _idx, {bound} "
                    f"FROM {IDS}")]
    prev = "_h0"
    for name, cols in _hash_stages(world):
        ctes.append((name, f"SELECT *, {', '.join(cols)} FROM {prev}"))
        prev = name
    ctes.append(("_e1", f"SELECT *, CAST(date_add(DATE'{cfg.start_date}', _day) AS DATE) AS dt, "
                        f"{s.context()} AS _c, {s.event_time()} AS event_time FROM {prev}"))
    slates = "array(" + ", ".join(s.base_slate(b) for b in range(len(world.bases))) + ")"
    ctes.append(("_e2", f"SELECT *, {slates} AS _slates, {s.chosen()} AS _chosen, "
                        f"{s.uniform_slate('_u_urand')} AS _urand FROM _e1"))
    body = (f"SELECT *, {at('_slates', '_chosen')} AS _slate, concat('{cfg.seed}-', CAST(dt AS STRING), '-', "
            f"CAST(_idx AS STRING)) AS event_id FROM _e2")
    return "WITH " + ",\n".join(f"{n} AS ({q})" for n, q in ctes) + "\n" + body


def logs_sql(world: World) -> str:
    names = arr([b.name for b in world.bases], "string")
    s = Sampling(world)
    return select_sql(LOGS, {
        "event_id": "event_id", "event_time": "event_time", "context_id": at("_w_ctx_names", "_c"),
        "context": at("_w_ctx_maps", "_c"), "logging_policy": at(names, "_chosen"),
        "slots": s.held(s.logged_slots()), "slate_reward": "CAST(NULL AS DOUBLE)", "dt": "dt"}, EVENTS)


def decisions_sql(world: World) -> str:
    entries = Sampling(world).decision_entries()
    exploded = f"(SELECT event_id, dt, explode(array({', '.join(entries)})) AS _d FROM {EVENTS}) _x"
    return select_sql(DECISIONS, {"policy_id": "_d.policy_id", "event_id": "event_id", "slots": "_d.slots",
                                       "base_policy": "_d.base_policy", "dt": "dt"}, exploded)


# ---- statistics of written logs (small results) ----------------------------------------------------------------
def ad_counts_sql(logs: str) -> str:
    """Per-ad clicks and impressions (any position) of the logs in relation ``logs``: n_ads rows."""
    return (f"SELECT s.ad_id AS ad_id, sum(coalesce(s.reward, CAST(0 AS DOUBLE))) AS clicks, "
            f"CAST(count(1) AS BIGINT) AS impressions FROM (SELECT explode(slots) AS s FROM {logs}) _s "
            f"GROUP BY s.ad_id")


def context_counts_sql(logs: str) -> str:
    """Events, slots and clicks per (dt, context_id): days x n_contexts rows."""
    clicks = "aggregate(slots, CAST(0 AS DOUBLE), (acc, s) -> acc + coalesce(s.reward, CAST(0 AS DOUBLE)))"
    return (f"SELECT dt, context_id, CAST(count(1) AS BIGINT) AS events, CAST(sum(size(slots)) AS BIGINT) AS slots, "
            f"sum({clicks}) AS clicks FROM {logs} GROUP BY dt, context_id")
