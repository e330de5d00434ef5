"""Candidate ads per event and the per-event choice of m distinct eligible ads (seed 000), as Spark SQL statements.

Eligibility table (``--eligibility PATH``, Parquet or a catalog table): columns (dt, ad_id) -- the ads that may be
shown on that day -- or (event_id, ad_id) [dt optional] -- per event (frequency caps). Every argmax of a learned
policy is restricted to the event's eligible ads. Without a table, the candidates are the ads seen in training.

Choices (per event, in SQL on the engine; nothing row-level reaches the driver). ``scored``: dt, event_id, ad_id,
known and the policy's scores (score, or score_1..score_m), from the candidate rows joined to the score table.
- ``top_m``: h_g(x) = the m eligible ads with the largest score g (ties broken by a seeded md5 uniform), positions
  1..m in decreasing g (C decreasing, so the best ad goes first).
- ``set_select_test``: Psi_k(x) = argmax over eligible ads of round k's score (ties: the larger uniform); a duplicate
  of an earlier round's choice is replaced, in round order, by an unused eligible ad in a seeded random order
  (``random``, the seed's rule) or by the best unused eligible ad by round k's own score (``next_best``, m
  sequential statements), so the output is m distinct eligible ads (seed 000, Set Select Test).
With fewer than m eligible ads both output all of them (n_eligible < m is counted and flagged per event).
Each returns the name of a relation with dt, event_id, slots, n_eligible, n_chosen, n_fallback_chosen, n_replaced.
"""
from __future__ import annotations

from ..errors import UsageError
from .scoring_sql import SLOT_TYPE, double, uniform

EVENT_LEVEL = "event"
DT_LEVEL = "dt"


def _over(order: str, extra: str = "", alias: str = "") -> str:
    """A window per event (and ``extra`` keys) ordered by ``order``."""
    keys = ", ".join(f"{alias}{c}" for c in ("dt", "event_id")) + (f", {extra}" if extra else "")
    return f"(PARTITION BY {keys} ORDER BY {order})"


def source(text: str | None):
    """The eligibility input as a Source (for the engine choice), or None."""
    if not text:
        return None
    from ..io import fs, sources

    if sources.is_table_name(text):
        return sources.Source(kind="table", name=text, obj=text)
    if not fs.exists(text):
        raise UsageError(f"--eligibility: no such table or path: {text}")
    _check_parquet(text)
    return sources.Source(kind="files", name="--eligibility", uri=fs.normalize(text))


def _check_parquet(text: str) -> None:
    """Every data file of the eligibility path is Parquet (footers only): a CSV or a stray file is exit 2 naming
    it, before any engine starts (DuckDB stopped with exit 1 on it)."""
    import pyarrow.parquet as pq

    from ..io import fs

    files = [f[0] for f in fs.data_files(fs.normalize(text))]
    if not files:
        raise UsageError(f"--eligibility {text}: no Parquet files there")
    for uri in files:
        loc = fs.resolve(uri)
        try:
            pq.read_schema(loc.path, filesystem=loc.fs)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for non-Parquet files
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"--eligibility: {uri} is not a readable Parquet file ({first}); give a Parquet "
                             f"table of (event_id or dt, ad_id)") from None


def read_eligibility(engine, src, name: str = "tr_elig") -> str:
    """Relation ``name`` of distinct (event_id, ad_id) or (dt, ad_id) rows; returns the level ('event' or 'dt')."""
    from ..io import fs
    from ..io.dt_layout import dt_partitions

    raw = f"{name}_raw"
    if src.kind == "table":
        engine.view(raw, f"SELECT * FROM {src.obj}")
    else:
        files = [f[0] for f in fs.data_files(src.uri)]
        if not files:
            raise UsageError(f"--eligibility {src.name}: no Parquet files under {src.uri}")
        engine.read_parquet(raw, files, root=src.uri if dt_partitions(src.uri) else None)
    cols = set(engine.columns(raw))
    if "ad_id" not in cols:
        raise UsageError(f"eligibility table {src.uri or src.obj} needs an ad_id column; has {sorted(cols)}")
    if "event_id" in cols:
        engine.materialize(name, f"SELECT DISTINCT CAST(event_id AS STRING) AS event_id, CAST(ad_id AS STRING) AS "
                                 f"ad_id FROM {raw} WHERE event_id IS NOT NULL AND ad_id IS NOT NULL")
        return EVENT_LEVEL
    if "dt" in cols:
        engine.materialize(name, f"SELECT DISTINCT try_cast(dt AS DATE) AS dt, CAST(ad_id AS STRING) AS ad_id "
                                 f"FROM {raw} WHERE dt IS NOT NULL AND ad_id IS NOT NULL")
        return DT_LEVEL
    raise UsageError(f"eligibility table {src.uri or src.obj} needs dt or event_id besides ad_id; has {sorted(cols)}")


def candidates(events: str, ads: str, eligibility: str | None = None, level: str | None = None) -> str:
    """(dt, event_id, ctx_key, context_id, ad_id): the eligible ads of every event (events without any are absent).
    ``events``: dt, event_id, ctx_key, context_id; ``ads`` (column ad_id): the default candidate set."""
    cols = "e.dt, e.event_id, e.ctx_key, e.context_id"
    if eligibility is None:
        return f"SELECT {cols}, a.ad_id FROM {events} e CROSS JOIN {ads} a"
    on = "e.dt = g.dt" if level == DT_LEVEL else "e.event_id = g.event_id"
    return f"SELECT {cols}, g.ad_id FROM {events} e JOIN {eligibility} g ON {on}"


def scored(cands: str, scores: str, seed: int, columns: str) -> str:
    """Candidate rows with the policy's score columns, known, and the seeded uniforms u (ties) and u2 (fills)."""
    return f"""
SELECT c.dt, c.event_id, c.ad_id, s.known, {columns}, {uniform(seed, 'c.event_id', 'c.ad_id')} AS u,
  {uniform(seed + 1, 'c.event_id', 'c.ad_id')} AS u2
FROM {cands} c JOIN {scores} s ON c.ctx_key = s.ctx_key AND c.ad_id = s.ad_id"""


def _per_event(chosen: str, counts: str) -> str:
    """Chosen rows (dt, event_id, k, ad_id, known, replaced) in round order -> slots at positions 1.. (nulls of
    exhausted pools dropped, so the positions close up), with the event's counts."""
    slot = f"named_struct('position', CAST(p AS INT), 'ad_id', ad_id, 'probability', {double(1)})"
    return f"""
SELECT n.dt, n.event_id, coalesce(c.slots, CAST(array() AS array<{SLOT_TYPE}>)) AS slots,
  CAST(n.n_eligible AS INT) AS n_eligible, CAST(coalesce(c.n_chosen, 0) AS INT) AS n_chosen,
  CAST(coalesce(c.n_fallback, 0) AS INT) AS n_fallback_chosen, CAST(coalesce(c.n_replaced, 0) AS INT) AS n_replaced
FROM {counts} n LEFT JOIN (
  SELECT dt, event_id, array_sort(collect_list({slot})) AS slots, count(1) AS n_chosen,
    sum(CASE WHEN known THEN 0 ELSE 1 END) AS n_fallback, sum(replaced) AS n_replaced
  FROM (SELECT *, row_number() OVER {_over('k')} AS p FROM {chosen}) x
  GROUP BY dt, event_id) c ON n.dt = c.dt AND n.event_id = c.event_id"""


def top_m(engine, scored_rel: str, m: int, name: str) -> str:
    """Per event the m eligible ads with the largest ``score`` (ties: the smaller uniform, then ad_id)."""
    engine.materialize(f"{name}_n", f"SELECT dt, event_id, count(1) AS n_eligible FROM {scored_rel} "
                                    f"GROUP BY dt, event_id")
    chosen = (f"(SELECT dt, event_id, r AS k, ad_id, known, 0 AS replaced FROM (SELECT *, row_number() OVER "
              f"{_over('score DESC, u ASC, ad_id ASC')} AS r FROM {scored_rel}) t WHERE r <= {int(m)})")
    engine.materialize(name, _per_event(chosen, f"{name}_n"))
    return name


def _ranked(engine, scored_rel: str, m: int, name: str) -> str:
    """Round scores unpivoted: (dt, event_id, ad_id, known, u2, k, rank of the ad in round k)."""
    rounds = ", ".join(f"named_struct('k', {k}, 's', score_{k})" for k in range(1, m + 1))
    engine.materialize(name, f"""
SELECT dt, event_id, ad_id, known, u2, k, row_number() OVER {_over('s DESC, u DESC, ad_id DESC', 'k')} AS rank
FROM (SELECT dt, event_id, ad_id, known, u, u2, r.k AS k, r.s AS s
      FROM (SELECT *, explode(array({rounds})) AS r FROM {scored_rel}) x) y""")
    engine.materialize(f"{name}_n", f"SELECT dt, event_id, count(1) AS n_eligible FROM {name} WHERE k = 1 "
                                    f"GROUP BY dt, event_id")
    return name


def set_select_test(engine, scored_rel: str, m: int, dedup: str, name: str) -> str:
    """Set Select Test (module docstring); ``scored_rel`` has score_1..score_m."""
    if dedup not in ("random", "next_best"):
        raise UsageError(f"dedup must be random or next_best; got {dedup!r}")
    ranked = _ranked(engine, scored_rel, m, f"{name}_rk")
    chosen = _random_fill(engine, ranked, name) if dedup == "random" else _next_best(engine, ranked, m, name)
    engine.materialize(name, _per_event(chosen, f"{ranked}_n"))
    return name


def _random_fill(engine, ranked: str, name: str) -> str:
    """Psi_k in round order; the j-th duplicate takes the j-th unused eligible ad in the seeded order u2."""
    on = "{a}.dt = {b}.dt AND {a}.event_id = {b}.event_id"
    engine.materialize(f"{name}_psi", f"""
SELECT dt, event_id, k, ad_id, known,
  row_number() OVER {_over('k', 'ad_id')} > 1 AS dup
FROM {ranked} WHERE rank = 1""")
    engine.materialize(f"{name}_fill", f"""
SELECT d.dt, d.event_id, d.k, p.ad_id, p.known
FROM (SELECT dt, event_id, k, row_number() OVER {_over('k')} AS j FROM {name}_psi WHERE dup) d
JOIN (SELECT r.dt, r.event_id, r.ad_id, r.known,
        row_number() OVER {_over('r.u2, r.ad_id', alias='r.')} AS j
      FROM (SELECT * FROM {ranked} WHERE k = 1) r
      LEFT JOIN (SELECT DISTINCT dt, event_id, ad_id FROM {name}_psi) q
        ON {on.format(a='r', b='q')} AND r.ad_id = q.ad_id
      WHERE q.ad_id IS NULL) p ON {on.format(a='d', b='p')} AND d.j = p.j""")
    return (f"(SELECT dt, event_id, k, ad_id, known, 0 AS replaced FROM {name}_psi WHERE NOT dup "
            f"UNION ALL SELECT dt, event_id, k, ad_id, known, 1 AS replaced FROM {name}_fill)")


def _next_best(engine, ranked: str, m: int, name: str) -> str:
    """Round k takes the best eligible ad by its own score among those not chosen in rounds 1..k-1 (Psi_k when it
    is unused): one statement per round."""
    prev = None
    for k in range(1, m + 1):
        pick = f"""
SELECT r.dt, r.event_id, {k} AS k, min_by(r.ad_id, r.rank) AS ad_id, min_by(r.known, r.rank) AS known,
  CASE WHEN min(r.rank) > 1 THEN 1 ELSE 0 END AS replaced
FROM (SELECT * FROM {ranked} WHERE k = {k}) r"""
        if prev is not None:
            pick += (f" LEFT JOIN {prev} c ON r.dt = c.dt AND r.event_id = c.event_id AND r.ad_id = c.ad_id "
                     f"WHERE c.ad_id IS NULL")
        pick += " GROUP BY r.dt, r.event_id"
        cur = f"{name}_nb{k}"
        engine.materialize(cur, pick if prev is None else f"SELECT * FROM {prev} UNION ALL {pick}")
        prev = cur
    return prev


def check_m(m: int) -> int:
    if m is None or int(m) < 1:
        raise UsageError(f"--m must be >= 1; got {m}")
    return int(m)
