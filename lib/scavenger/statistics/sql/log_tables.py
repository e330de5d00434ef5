"""The per-day statistics tables: one aggregation each over the clean flat events (scv_flat) or the joined
decisions (scv_joined). Every value column is a count, a sum or a max/min, so a window is the sum of its days
(``statistics/tables.py`` merges them). Keys and value columns are documented per statement."""
from __future__ import annotations

from .literals import text

_POISSON_CDF = None


def _poisson1_cdf(jmax: int = 15) -> list[float]:
    import math

    out, term, acc = [], math.exp(-1.0), 0.0
    for j in range(jmax + 1):
        acc += term
        out.append(acc)
        term /= (j + 1)
    return out


def _uniform(seed: int, b: int) -> str:
    """A uniform in [0, 1) per (seed, replicate, event) from md5 (52 bits: the same number in both engines)."""
    return (f"CAST(conv(substr(md5(concat('{int(seed)}:{int(b)}:', event_id)), 1, 13), 16, 10) AS DOUBLE) "
            f"/ 4503599627370496D")


def _poisson(seed: int, b: int) -> str:
    """A Poisson(1) draw by inverse CDF: sum_j 1[u > F(j)]."""
    u = _uniform(seed, b)
    return "(" + " + ".join(f"CASE WHEN bu_{b} > {c!r} THEN 1 ELSE 0 END" for c in _poisson1_cdf()) + ")", u


def log_summary(K: int, Kw: int) -> str:
    """(dt, logging_policy): n_events, n_slots, s_r, s_r2 (sums of r, r^2), n_missing_propensity, n_null_reward,
    n_partial (rows not holding every position 1..K: a clean row holds distinct positions <= K, so those with fewer
    than K slots), k_max, r_max, r_min. T_a of the base-policy scavenging action (seed 001 section 3.3) is n_events
    of logging policy a."""
    from .logs import largest_held

    nnull = " + ".join([f"CASE WHEN a_{k} IS NOT NULL AND w_{k} IS NULL THEN 1 ELSE 0 END" for k in range(1, Kw + 1)]
                       + ["coalesce(size(filter(xs, s -> s.reward IS NULL)), 0)"])
    return f"""
SELECT dt, logging_policy, count(1) AS n_events, CAST(sum(n_slots) AS BIGINT) AS n_slots,
  sum(r) AS s_r, sum(r * r) AS s_r2,
  CAST(sum(CASE WHEN miss THEN 1 ELSE 0 END) AS BIGINT) AS n_missing_propensity,
  CAST(sum({nnull}) AS BIGINT) AS n_null_reward,
  CAST(sum(CASE WHEN n_slots = {K} THEN 0 ELSE 1 END) AS BIGINT) AS n_partial,
  max({largest_held(Kw)}) AS k_max, max(r) AS r_max, min(r) AS r_min
FROM scv_flat GROUP BY dt, logging_policy"""


def stratum_count(stratum: str = "context_id") -> str:
    """Clean events and (approximately) the distinct values of the calibration scope key: whether ad_position sums
    per value first (:func:`ad_position`, ``by_value``)."""
    return f"SELECT count(1) AS n, approx_count_distinct({_scope_value(stratum)}) AS strata FROM scv_flat"


def _scope_value(stratum: str) -> str:
    """A flat row's value of the calibration scope key as text: context_id (null as '<null>'), or the flat column
    ``stratum`` (already text, see logs.flat_columns)."""
    return "coalesce(context_id, '<null>')" if stratum == "context_id" else stratum


KNOWN_WEIGHT = "CASE WHEN s.reward IS NULL THEN 0 ELSE bw_{b} END"   # replicate b's weight of a known reward
BOOT_CLICKS = "coalesce(bw_{b} * s.reward, 0D)"                      # its weighted reward (unknown: none)


def ad_position(Kw: int, bootstrap: int = 0, seed: int = 0, stratum: str = "context_id",
                by_value: bool = True) -> str:
    """(dt, logging_policy, fold, ad_id, position): m = impressions, m_r = impressions whose slot reward is known
    M(a,i), c = clicks C(a,i) (sum of the known slot rewards), c2 = sum of their squares (seed 001 section 4.3:
    CTR(a,i) = c / m_r; a slot with a null reward, its row carrying a slate_reward, is no 0 click: it is left out
    of m_r, c, c2), ev = sum over the impressions of 1 / (slots the event holds) (events, counted once over all the
    ads they show); for check e the logged propensities (n_p non-null, sum_p, min_p, max_p) and the
    smallest/largest value of the calibration scope key (whether it partitions the ads; ``stratum``: its flat
    column); with ``bootstrap`` B > 0, m_boot[b], c_boot[b]: m_r and c under Poisson(1) weights per event.

    Two aggregations: the sums per (cell, stratum value) first, then the cells with the stratum's min/max over
    those few rows (``by_value``). A text min/max has no fixed-width buffer, so Spark aggregates it by sorting every
    impression (4M events over 100 contexts: 7.6-8.7 s in one aggregation, 2.8-4.6 s in two; DuckDB 0.6 s either
    way). With nearly one value per event the first step does not shrink the rows (Spark: 7.3-10.2 s in one
    aggregation, 17.2-21.3 s in two), so the scan sums per value only when the values are few
    (:func:`stratum_count`, declarations.BY_VALUE_EVENTS)."""
    from .logs import held_slots

    src = "scv_flat"
    if bootstrap > 0:
        draws = [_poisson(seed, b) for b in range(bootstrap)]
        # bu_b, bw_b: the replicate's uniform and Poisson weight (names apart from the flat slot columns w_k)
        boot_cols = ", ".join(f"{u} AS bu_{b}" for b, (_, u) in enumerate(draws))
        weights = ", ".join(f"{w} AS bw_{b}" for b, (w, _) in enumerate(draws))
        src = f"(SELECT e.*, {weights} FROM (SELECT scv_flat.*, {boot_cols} FROM scv_flat) e)"
    strat = _scope_value(stratum)
    # ew = 1 / (slots the event holds): summed over an ad's impressions (ev) and then over the ads of a set, it
    # counts the events that showed them (factored.stratum_weights: the events of an eligibility stratum)
    keep = (f"dt, logging_policy, fold, {strat} AS stratum, 1D / greatest(n_slots, 1) AS ew"
            + "".join(f", bw_{b}" for b in range(bootstrap)))
    sums = ("count(1) AS m, count(s.reward) AS m_r, coalesce(sum(s.reward), 0D) AS c,\n"
            "  coalesce(sum(s.reward * s.reward), 0D) AS c2, sum(ew) AS ev,\n"
            "  count(s.propensity) AS n_p, sum(s.propensity) AS sum_p, min(s.propensity) AS min_p, "
            "max(s.propensity) AS max_p")
    impressions = f"""FROM (SELECT {keep}, explode({held_slots(Kw)}) AS s FROM {src} f) slots
WHERE s.ad_id IS NOT NULL
GROUP BY dt, logging_policy, fold, s.ad_id, s.position"""
    cell = "dt, logging_policy, fold, s.ad_id AS ad_id, s.position AS position"
    if not by_value:
        return f"""
SELECT {cell}, {sums},
  min(stratum) AS stratum_min, max(stratum) AS stratum_max{_boot_arrays(bootstrap, KNOWN_WEIGHT, BOOT_CLICKS)}
{impressions}"""
    per_value = "".join(f", sum({KNOWN_WEIGHT.format(b=b)}) AS mb_{b}, sum({BOOT_CLICKS.format(b=b)}) AS cb_{b}"
                        for b in range(bootstrap))
    return f"""
SELECT dt, logging_policy, fold, ad_id, position, CAST(sum(m) AS BIGINT) AS m, CAST(sum(m_r) AS BIGINT) AS m_r,
  sum(c) AS c, sum(c2) AS c2,
  sum(ev) AS ev, CAST(sum(n_p) AS BIGINT) AS n_p, sum(sum_p) AS sum_p, min(min_p) AS min_p, max(max_p) AS max_p,
  min(stratum) AS stratum_min, max(stratum) AS stratum_max{_boot_arrays(bootstrap, "mb_{b}", "cb_{b}")}
FROM (
  SELECT {cell}, stratum, {sums}{per_value}
  {impressions}, stratum
) cells
GROUP BY dt, logging_policy, fold, ad_id, position"""


def _boot_arrays(bootstrap: int, m: str, c: str) -> str:
    """The bootstrap columns m_boot, c_boot: arrays of sum(m), sum(c) over the replicates b (``m``, ``c``: the
    summed expressions with ``{b}`` for the replicate)."""
    if bootstrap <= 0:
        return ""
    return (", array(" + ", ".join(f"CAST(sum({m.format(b=b)}) AS BIGINT)" for b in range(bootstrap))
            + ") AS m_boot, array(" + ", ".join(f"sum({c.format(b=b)})" for b in range(bootstrap)) + ") AS c_boot")


def _extra_ads() -> str:
    """The extra slots of a flat row (xs) reduced to what a slate key reads: (position, ad_id)."""
    return "transform(xs, s -> named_struct('position', s.position, 'ad_id', s.ad_id))"


def context_cells() -> str:
    """(dt, logging_policy, position, feature, value, ad_id): n = impressions of the ad at the position under
    that value of a context feature (every key of the context map, and context_id): check a's tables. Reads the
    clean events with their context map (scv_events), which the narrow flat relation does not carry. Two steps, so
    that the explode of features times slots runs over distinct cells, not over events: the slots are counted per
    (context_id, context) first, the context keyed by its JSON text (scv_ev's context_json: a map is no grouping
    key in Spark and a slow one in DuckDB; the text is one-to-one with the map), then the features of each cell
    are exploded and summed.
    A context map that repeats context_id is not counted twice (see below)."""
    cid = "named_struct('key', 'context_id', 'value', coalesce(context_id, '<null>'))"
    from .logs import CONTEXT_MAP as ctx

    # a map entry named context_id is the column again when it holds the same value (dropped: counted once), and
    # another feature when it does not (named context:context_id, as a calibration key names a map value)
    entries = (f"transform(filter(map_entries({ctx}), e -> NOT (e.key = 'context_id' AND e.value <=> context_id)), "
               f"e -> named_struct('key', CASE WHEN e.key = 'context_id' THEN 'context:context_id' ELSE e.key END, "
               f"'value', e.value))")
    features = (f"CASE WHEN context_json IS NULL THEN array({cid}) "
                f"ELSE concat({entries}, array({cid})) END")
    return f"""
SELECT dt, logging_policy, position, f.key AS feature, coalesce(f.value, '<null>') AS value, ad_id,
  CAST(sum(n) AS BIGINT) AS n
FROM (
  SELECT dt, logging_policy, position, ad_id, n, explode({features}) AS f
  FROM (
    SELECT dt, logging_policy, context_id, context_json, s.position AS position, s.ad_id AS ad_id, count(1) AS n
    FROM (SELECT dt, logging_policy, context_id, context_json, explode(slots) AS s
          FROM scv_events WHERE clean) e
    GROUP BY dt, logging_policy, context_id, context_json, s.position, s.ad_id
  ) cells
) features
GROUP BY dt, logging_policy, position, f.key, coalesce(f.value, '<null>'), ad_id"""


def _fold_sums(f: int) -> str:
    """Check f's reward sums of fold ``f`` over the pair rows (:func:`pair_cells`)."""
    known = f"CASE WHEN fold = {f} AND p.w IS NOT NULL THEN p.wj END"
    return (f"count(CASE WHEN fold = {f} THEN p.w END) AS n_w{f}, "
            f"coalesce(sum(CASE WHEN fold = {f} THEN p.w END), 0D) AS s{f}, "
            f"coalesce(sum(CASE WHEN fold = {f} THEN p.w * p.w END), 0D) AS q{f},\n  count({known}) AS n_j{f}, "
            f"coalesce(sum({known}), 0D) AS s_j{f}, count(CASE WHEN fold = {f} THEN p.wj END) AS n_ja{f}, "
            f"coalesce(sum(CASE WHEN fold = {f} THEN p.wj END), 0D) AS s_ja{f}")


def pair_cells(Kw: int) -> str:
    """scv_pair_cells: (dt, logging_policy, stratum, j, k, a, b) -> n, events with ad a at position j and ad b at
    position k (j < k; a held, b null where the event does not hold k), stratum = context_id. The pairs of wide
    positions from the flat columns (one explode of the Kw(Kw-1)/2 pairs, no per-row lambda); the pairs with an
    extra slot from the few rows that have one (each such row gives as many pairs as it holds).
    Check d (:func:`pair_strata`) reads n where b is held; check f (sql/interaction_tables.py) the wide pairs'
    reward sums per fold f (0, 1: a column each, so that the rows stay check d's): n_w{f}, s{f}, q{f} (count, sum
    and sum of squares of the known rewards w_k), n_j{f}, s_j{f} (the known rewards at j of those events) and
    n_ja{f}, s_ja{f} (at j, over every event). One aggregation for both checks: on Spark, one shuffle, not one per
    check."""
    ks = range(1, Kw + 1)
    no_w = "'w', CAST(NULL AS DOUBLE), 'wj', CAST(NULL AS DOUBLE)"
    wide = ", ".join(f"named_struct('j', {j}, 'k', {k}, 'a', a_{j}, 'b', a_{k}, 'w', w_{k}, 'wj', w_{j})"
                     for j in ks for k in ks if k > j)
    with_wide = ", ".join(f"named_struct('j', {j}, 'k', x.position, 'a', a_{j}, 'b', x.ad_id, {no_w})" for j in ks)
    with_extra = ("transform(filter(xs, y -> y.position < x.position), "
                  f"y -> named_struct('j', y.position, 'k', x.position, 'a', y.ad_id, 'b', x.ad_id, {no_w}))")
    extra_pairs = f"concat(array({with_wide}), {with_extra})" if Kw else with_extra
    parts = []
    cs = "coalesce(context_id, '<null>') AS cs"
    if Kw > 1:
        parts.append(f"SELECT dt, logging_policy, fold, {cs}, explode(array({wide})) AS p FROM scv_flat")
    parts.append(f"SELECT dt, logging_policy, fold, {cs}, explode({extra_pairs}) AS p "
                 f"FROM (SELECT scv_flat.*, explode(xs) AS x FROM scv_flat WHERE xs IS NOT NULL) e")
    union = "\n  UNION ALL\n  ".join(parts)
    # no WITH clause: Spark matches a persisted relation to its later uses by plan, and a CTE used twice gets new
    # ids on each analysis, so the cached rows would never be found (every use would recompute the explode)
    return f"""
SELECT dt, logging_policy, cs AS stratum, p.j AS j, p.k AS k, p.a AS a, p.b AS b, count(1) AS n,
  {_fold_sums(0)},
  {_fold_sums(1)}
FROM (
  {union}
) pairs
WHERE p.a IS NOT NULL
GROUP BY dt, logging_policy, cs, p.j, p.k, p.a, p.b"""


def pair_strata() -> str:
    """(dt, logging_policy, stratum, j, k) over scv_pair_cells' rows with both slots held: check d within
    (context, day) strata. n events showing positions j < k; r, c distinct ads of slot j, slot k; s = sum over cells
    O^2 / (R_a C_b); o_diag = events with the same ad in both; e_diag = sum_a R(a) C(a) / n, the repeats expected if
    the slots were chosen independently (seed 002's factorized mu). Pooled by checks/contingency.stratified_dependence.
    """
    key = "dt, logging_policy, stratum, j, k"
    cells = "(SELECT * FROM scv_pair_cells WHERE b IS NOT NULL)"
    # the row and column marginals by window (no self-joins), then the diagonal's sum from one table of both
    # marginals per ad: a handful of aggregations, so Spark runs few exchanges over the cells
    return f"""
WITH m AS (
  SELECT {key}, a, b, n, sum(n) OVER (PARTITION BY {key}, a) AS ra, sum(n) OVER (PARTITION BY {key}, b) AS cb
  FROM {cells} c
), sums AS (
  SELECT {key}, sum(n) AS n, sum(CAST(n AS DOUBLE) * n / (ra * cb)) AS s,
    sum(CASE WHEN a = b THEN n ELSE 0 END) AS o_diag
  FROM m GROUP BY {key}
), marg AS (
  SELECT {key}, ad, sum(r) AS r, sum(c) AS c
  FROM (SELECT {key}, a AS ad, n AS r, 0 AS c FROM {cells} c1
        UNION ALL SELECT {key}, b AS ad, 0 AS r, n AS c FROM {cells} c2) u
  GROUP BY {key}, ad
), diag AS (
  SELECT {key}, CAST(sum(CASE WHEN r > 0 THEN 1 ELSE 0 END) AS BIGINT) AS r,
    CAST(sum(CASE WHEN c > 0 THEN 1 ELSE 0 END) AS BIGINT) AS c, sum(CAST(r AS DOUBLE) * c) AS rc_diag
  FROM marg GROUP BY {key}
)
SELECT {key}, CAST(n AS BIGINT) AS n, r, c, s, CAST(o_diag AS BIGINT) AS o_diag, rc_diag / n AS e_diag
FROM sums JOIN diag USING ({key})"""


def calibration_cells(stratum: str) -> str:
    """(dt, logging_policy, stratum, position, ad_id) for a calibration scope the user fixed (check e): n, n_p,
    sum_p, min_p, max_p of the logged propensities within each value of the key."""
    return f"""
SELECT dt, logging_policy, stratum, s.position AS position, s.ad_id AS ad_id, count(1) AS n,
  count(s.propensity) AS n_p, sum(s.propensity) AS sum_p, min(s.propensity) AS min_p, max(s.propensity) AS max_p
FROM (SELECT dt, logging_policy, coalesce(CAST({stratum} AS STRING), '<null>') AS stratum, explode(slots) AS s
      FROM scv_events WHERE clean) slots
GROUP BY dt, logging_policy, stratum, s.position, s.ad_id"""


def stratum_sql(key: str) -> str:
    """The column of a calibration scope key: ``context_id`` or ``context:<name>`` (a context-map value)."""
    if key == "context_id":
        return "context_id"
    if key.startswith("context:") and len(key) > len("context:"):
        from .logs import CONTEXT_MAP

        return f"element_at({CONTEXT_MAP}, {text(key[len('context:'):])})"
    raise ValueError(f"calibration scope key must be context_id or context:<name>, got {key!r}")
