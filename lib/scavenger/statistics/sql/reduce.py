"""Window-level reductions of the big per-day tables (as many rows as events), run by the engine that holds them:
only a few sums per target policy reach the driver (issue 20: the direct-approach slate tables are never
collected)."""
from __future__ import annotations


def scavenging(actions: str, targets: str, where: str, by_dt: bool = False, prefixes: tuple = ()) -> str:
    """Exploration scavenging, direct approach (seed 001 sections 3 and 4.1; MATH.md). Within the stratum of the
    positions a row holds (held), T_a = logged events with slate a among the events the policy has a decision for
    (``actions``: the slate_covered table, keyed by policy_id; t_s likewise), S_a, Q_a = sums of r, r^2 over the events whose
    logged slate equals the target's. V_s = sum_a S_a/T_a; the CLT variance sum_a s2_a/T_a with
    s2_a = (Q_a - S_a^2/T_a)/(T_a - 1) (Q_a for T_a = 1); Theorem 3 uses sum over the target's logged actions of
    T_a^(-1/2). As an IPW mean over the stratum's t_s events with w = t_s/T_a on matched events: sum_w, sum_w2,
    sum_wr, sum_w2r, sum_w2r2 and w_max.

    ``prefixes`` (days): the sums of every prefix window of the window (its first day through each of them; dt the
    prefix's last day) in one statement, each row of a day counted in the prefixes that hold it, instead of one
    statement per prefix (evaluate --by-day's running/): running sums per slate (:func:`_running_sums`), T_a of
    the slates the targets show only, T_s and the number of actions from running totals (:func:`_running_totals`)."""
    d = "dt, " if by_dt or prefixes else ""
    totals = f"SELECT {d}policy_id, held, sum(t) AS t_s, count(1) AS n_actions FROM a GROUP BY {d}policy_id, held"
    if prefixes:
        by_dt = True
        ends = ", ".join(f"DATE '{day.isoformat()}'" for day in prefixes)
        # T_a of the slates the targets show only (the join below reads no other), T_s and the number of actions
        # from running totals: the logs' every slate once per prefix end was most of the statement
        k = "policy_id, held, slate_key"
        shown = (f"(SELECT c.dt, c.policy_id, c.held, c.slate_key, c.t FROM (SELECT dt, {k}, t FROM {actions} "
                 f"WHERE {where}) c JOIN (SELECT DISTINCT {k} FROM {targets} WHERE {where}) k ON c.policy_id = "
                 f"k.policy_id AND c.held = k.held AND c.slate_key = k.slate_key)")
        totals = _running_totals(actions, where, ends)
        actions, targets = (_running_sums(shown, _columns("slate_covered"), "1 = 1", ends),
                            _running_sums(targets, _columns("slate_targets"), where, ends))
        where = "1 = 1"
    on_dt = " AND g.dt = a.dt" if by_dt else ""
    s_dt = " AND g.dt = s.dt" if by_dt else ""
    gd = "g.dt, " if by_dt else ""
    w = "(CAST(s.t_s AS DOUBLE) / a.t)"
    return f"""
WITH a AS (
  SELECT {d}policy_id, held, slate_key, CAST(sum(t) AS DOUBLE) AS t FROM {actions} WHERE {where}
  GROUP BY {d}policy_id, held, slate_key
), s AS (
  {totals}
), g AS (
  SELECT {d}policy_id, held, slate_key, sum(n_target) AS n_target, sum(n_match) AS n_match, sum(s_r) AS s_r,
    sum(s_r2) AS s_r2
  FROM {targets} WHERE {where} GROUP BY {d}policy_id, held, slate_key
)
SELECT {gd}g.policy_id, g.held, max(s.t_s) AS t_s, max(s.n_actions) AS n_actions,
  CAST(sum(g.n_target) AS BIGINT) AS n_target,
  CAST(sum(CASE WHEN a.t IS NULL THEN g.n_target ELSE 0 END) AS BIGINT) AS n_unsupported,
  CAST(sum(g.n_match) AS BIGINT) AS n_match, coalesce(sum(g.s_r), 0D) AS s_match_r,
  coalesce(sum(g.s_r2), 0D) AS s_match_r2,
  CAST(sum(CASE WHEN a.t IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS actions_used,
  coalesce(sum(g.s_r / a.t), 0D) AS v,
  coalesce(sum(CASE WHEN a.t > 1 THEN greatest(g.s_r2 - g.s_r * g.s_r / a.t, 0D) / (a.t - 1) / a.t
                    WHEN a.t = 1 THEN g.s_r2 END), 0D) AS var_clt,
  coalesce(sum(CASE WHEN a.t IS NOT NULL THEN 1D / sqrt(a.t) END), 0D) AS inv_sqrt_t,
  coalesce(sum(g.n_match * {w}), 0D) AS sum_w,
  coalesce(sum(g.n_match * {w} * {w}), 0D) AS sum_w2,
  coalesce(sum(g.s_r * {w}), 0D) AS sum_wr,
  coalesce(sum(g.s_r * {w} * {w}), 0D) AS sum_w2r,
  coalesce(sum(g.s_r2 * {w} * {w}), 0D) AS sum_w2r2,
  max(CASE WHEN g.n_match > 0 THEN {w} END) AS w_max
FROM g LEFT JOIN a ON g.policy_id = a.policy_id AND g.held = a.held AND g.slate_key = a.slate_key{on_dt}
JOIN s ON g.policy_id = s.policy_id AND g.held = s.held{s_dt}
GROUP BY {gd}g.policy_id, g.held"""


def _running_sums(table: str, cols: list, where: str, ends: str) -> str:
    """The rows of ``table`` (a big slate table: per day and (policy_id, held, slate_key), sums) as those of every
    prefix window through each of ``ends``: per key and end, the sums over the days up to it (dt: the end), for the
    keys some day up to it holds. A running sum over the days, each key once per end from its first day on (a
    generator of the ends beside a union, not a join: Spark 4's planner lost dt in a join of a stored days' union
    with the prefix ends, "key not found: dt"); each day's row counted once per end that holds it, as one row per
    (row, end) did at fifteen times the rows (0.79 s of a 30-day run with 3,600 slates)."""
    keys = ["policy_id", "held", "slate_key"]
    values = [c for c in cols if c not in keys]
    k = ", ".join(keys)
    running = ", ".join(f"sum({v}) OVER (PARTITION BY {k} ORDER BY upto ROWS BETWEEN UNBOUNDED PRECEDING AND "
                        f"CURRENT ROW) AS {v}" for v in values)
    return f"""(SELECT upto AS dt, {k}, {', '.join(values)} FROM (
    SELECT upto, {k}, {running} FROM (
      SELECT upto, {k}, {', '.join(f"sum({v}) AS {v}" for v in values)} FROM (
        SELECT dt AS upto, {k}, {', '.join(values)} FROM {table} WHERE {where}
        UNION ALL
        SELECT upto, {k}, {', '.join(f"NULL AS {v}" for v in values)} FROM (
          SELECT {k}, first_dt, explode(array({ends})) AS upto
          FROM (SELECT {k}, min(dt) AS first_dt FROM {table} WHERE {where} GROUP BY {k}) f) e
        WHERE upto >= first_dt) u
      GROUP BY upto, {k}) d) r
  WHERE upto IN ({ends}))"""


def _running_totals(actions: str, where: str, ends: str) -> str:
    """Per prefix end and (policy_id, held): t_s, the events of the days up to it (a running total of each day's
    t), and n_actions, the slates logged by then (a running count of each slate's first day); what ``s`` sums over
    every slate's running rows, without them."""
    ph = "policy_id, held"
    over = f"OVER (PARTITION BY {ph} ORDER BY upto ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    return f"""SELECT upto AS dt, {ph}, CAST(t_s AS DOUBLE) AS t_s, CAST(n_actions AS BIGINT) AS n_actions FROM (
    SELECT upto, {ph}, sum(t) {over} AS t_s, sum(n_new) {over} AS n_actions FROM (
      SELECT upto, {ph}, sum(t) AS t, sum(n_new) AS n_new FROM (
        SELECT dt AS upto, {ph}, t, CAST(NULL AS BIGINT) AS n_new FROM {actions} WHERE {where}
        UNION ALL
        SELECT first_dt AS upto, {ph}, CAST(NULL AS BIGINT) AS t, CAST(1 AS BIGINT) AS n_new
        FROM (SELECT {ph}, slate_key, min(dt) AS first_dt FROM {actions} WHERE {where} GROUP BY {ph}, slate_key) f
        UNION ALL
        SELECT upto, {ph}, CAST(NULL AS BIGINT) AS t, CAST(NULL AS BIGINT) AS n_new FROM (
          SELECT {ph}, first_dt, explode(array({ends})) AS upto
          FROM (SELECT {ph}, min(dt) AS first_dt FROM {actions} WHERE {where} GROUP BY {ph}) f) e
        WHERE upto >= first_dt) u
      GROUP BY upto, {ph}) p) r
  WHERE upto IN ({ends})"""


def _columns(table: str) -> list:
    """The columns of a big table but dt (statistics/declarations.py)."""
    from ..tables import big_columns

    return [c for c in big_columns()[table] if c != "dt"]
