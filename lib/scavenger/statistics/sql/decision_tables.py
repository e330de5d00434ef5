"""Per-day tables over the joined decisions (scv_joined, clean rows): every target policy in one aggregation each.

Notation: Y_k = pi_k(a_k|x)/mu_k(a_k|x) (1 for a position the row does not hold), W = prod_k Y_k, r the slate
reward (MATH.md "Slate OPE"); q_j = pi(ad at position j | x) for a logged slot's ad (MATH.md "Factored")."""
from __future__ import annotations


def moment_columns(Kw: int) -> str:
    """The slate moments' sums of the wide positions, generated from their declaration
    (estimators/slate_moments.py ``moment_terms``), over the events with every held propensity (``NOT miss``;
    ``n_missing_propensity`` counts the others). W includes the extra positions (column ``W``)."""
    from ...estimators.slate_moments import moment_terms

    cols = []
    for alias, agg, factors in moment_terms(Kw):
        if alias == "n_missing_propensity":
            cols.append("CAST(sum(CASE WHEN miss THEN 1 ELSE 0 END) AS BIGINT) AS n_missing_propensity")
            continue
        prod = _product(factors)
        if alias == "n":
            cols.append("CAST(sum(CASE WHEN miss THEN 0 ELSE 1 END) AS BIGINT) AS n")
        elif agg == "sum":
            cols.append(f"sum(CASE WHEN miss THEN NULL ELSE {prod} END) AS {alias}")
        elif agg == "count_pos":
            cols.append(f"CAST(sum(CASE WHEN NOT miss AND {prod} > 0 THEN 1 ELSE 0 END) AS BIGINT) AS {alias}")
        elif agg == "max":
            cols.append(f"max(CASE WHEN miss THEN NULL ELSE {prod} END) AS {alias}")
        else:  # pragma: no cover - the declaration has no other kind
            raise ValueError(f"unknown moment aggregation {agg!r} for {alias}")
    return ",\n  ".join(cols)


def _product(factors) -> str:
    terms = [f"Y_{f[1:]}" if f.startswith("Y") else f for f in factors if f != "1"]
    return " * ".join(terms) if terms else "1D"


def _weights(Kw: int) -> str:
    """Y_k = pi_k(a_k)/mu_k(a_k) per wide position (1 where the row does not hold k), and W = prod_k Y_k over every
    held position (the extras' Y multiply in)."""
    from .decisions import target_prob, wide_target_prob

    ys = [f"CASE WHEN a_{k} IS NULL THEN 1D ELSE try_divide({wide_target_prob(k)}, mu_{k}) END AS Y_{k}"
          for k in range(1, Kw + 1)]
    extra = (f"CASE WHEN xs IS NULL THEN 1D ELSE aggregate(xs, 1D, (acc, s) -> acc * "
             f"try_divide({target_prob('s.position', 's.ad_id')}, s.propensity)) END AS xw")
    return ", ".join(ys + [extra])


def _reorders(Kw: int) -> str:
    """A target whose ads of positive probability are exactly the logged ads: it re-orders the logged slate,
    deterministically or at random (a stochastic target that shuffles the logged slate depends on it as much as
    a deterministic one: before, factored gave 2.5x its value and no re-ordering estimate). For a
    one-entry-per-position decision on a row without extra slots (nearly all) with Kw <= 8: as many entries as held
    slots and every logged ad among them (a clean row's ads are distinct); another decision on such a row: no ad
    of positive probability outside the logged ones, and each logged one among them; else the sorted ads
    compared."""
    from .logs import logged_set

    ks = range(1, Kw + 1)
    tset_simple = "array_sort(array_compact(array(" + ", ".join(f"d_a_{k}" for k in ks) + ")))"
    tset = (f"CASE WHEN simple THEN {tset_simple} "
            f"ELSE array_sort(array_distinct(transform(filter(dslots, x -> x.probability > 0), x -> x.ad_id))) END")
    general = f"{tset} = {logged_set(Kw)}"
    if Kw > 8:
        return general
    entries = " + ".join(f"CASE WHEN d_a_{k} IS NOT NULL THEN 1 ELSE 0 END" for k in ks)
    targets = ", ".join(f"d_a_{k}" for k in ks)
    member = " AND ".join(f"(a_{k} IS NULL OR a_{k} IN ({targets}))" for k in ks)
    # a listed decision on a row without extra slots: first whether an ad of positive probability is not logged
    # (one pass over the entries, no sort: a stochastic target over a catalogue nearly always has one), then
    # whether every logged ad has positive probability (8 policies, half of them stochastic: +5.5 s with the sort)
    logged = ", ".join(f"a_{k}" for k in ks)
    outside = f"size(filter(dslots, x -> x.probability > 0 AND NOT coalesce(x.ad_id IN ({logged}), false))) > 0"
    covered = " AND ".join(f"(a_{k} IS NULL OR size(filter(dslots, x -> x.probability > 0 AND x.ad_id = a_{k})) > 0)"
                           for k in ks)
    return (f"CASE WHEN simple AND xs IS NULL THEN coalesce(({entries}) = n_slots AND {member}, false) "
            f"WHEN xs IS NULL THEN CASE WHEN {outside} THEN false ELSE coalesce({covered}, false) END "
            f"ELSE {general} END")


def _short(Kw: int) -> str:
    """The decision lists no entry at a position the row holds: the target's slate leaves that position empty, a
    slate the logger never shows (pi_k(a_k | x) is no probability of a distribution over the ads at k). A clean
    simple decision lists positions 1..n (d_a_k is null beyond n); another lists the positions of its entries."""
    ks = range(1, Kw + 1)
    simple = " OR ".join([f"(a_{k} IS NOT NULL AND d_a_{k} IS NULL)" for k in ks] + ["xs IS NOT NULL"])
    general = " OR ".join([f"(a_{k} IS NOT NULL AND size(filter(dslots, x -> x.position = {k})) = 0)" for k in ks]
                          + ["(xs IS NOT NULL AND size(filter(xs, s -> size(filter(dslots, "
                             "x -> x.position = s.position)) = 0)) > 0)"])
    return f"CASE WHEN simple THEN {simple} ELSE {general} END"


def policy_groups(K, Kw: int) -> str:
    """(dt, policy_id, logging_policy, base_policy, fold): n_all (events with a decision), n_det (deterministic),
    n_reorder (re-orderings of the logged ads, :func:`_reorders`), n_short (decisions leaving a held position empty,
    :func:`_short`), s_r_all, s_r2_all, n_partial (rows holding fewer than ``K`` positions: the row's day's K, a
    number or a CASE over dt, scan.held_positions_sql), and the slate moments
    of the wide positions (the extra positions: :func:`policy_extras`). Split on the driver into policy_events,
    base_targets and slate_moments (``statistics/tables.py``)."""
    wprod = " * ".join([f"Y_{k}" for k in range(1, Kw + 1)] + ["xw"])
    return f"""
SELECT dt, policy_id, logging_policy, base_policy, fold,
  count(1) AS n_all,
  CAST(sum(CASE WHEN det THEN 1 ELSE 0 END) AS BIGINT) AS n_det,
  CAST(sum(CASE WHEN reorders THEN 1 ELSE 0 END) AS BIGINT) AS n_reorder,
  CAST(sum(CASE WHEN short THEN 1 ELSE 0 END) AS BIGINT) AS n_short,
  CAST(sum(CASE WHEN n_slots = {K} THEN 0 ELSE 1 END) AS BIGINT) AS n_partial,
  sum(r) AS s_r_all, sum(r * r) AS s_r2_all,
  {moment_columns(Kw)}
FROM (SELECT y.*, {wprod} AS W FROM (
  SELECT dt, policy_id, logging_policy, base_policy, fold, det, n_slots, r, miss, {_reorders(Kw)} AS reorders,
    {_short(Kw)} AS short, {_weights(Kw)}
  FROM scv_joined WHERE clean) y) w
GROUP BY dt, policy_id, logging_policy, base_policy, fold"""


def policy_extras(Kw: int) -> str:
    """The slate moments of positions beyond Kw in long form, over the rows that hold one (clean, every held
    propensity): with D_k = Y_k - 1 (0 where a row does not hold k), per (dt, policy_id, logging_policy, fold, j, k):
      j = 0:       n = events holding k, s_v, s_rv, s_r2v = sums of D_k, r D_k, r^2 D_k; max_y, n_pos of Y_k
      1 <= j <= k: s_v, s_rv, s_r2v = sums of D_j D_k, r D_j D_k, r^2 D_j D_k (j a wide or an extra position)
    Since Y_j Y_k = 1 + D_j + D_k + D_j D_k, the driver completes the wide moments with these
    (``statistics/tables.py`` add_extra_moments): the work grows with the slots the rows really hold."""
    from .decisions import target_prob, wide_target_prob

    ys = ", ".join(f"CASE WHEN a_{k} IS NULL THEN 1D ELSE try_divide({wide_target_prob(k)}, mu_{k}) END AS Y_{k}"
                   for k in range(1, Kw + 1))
    xys = (f"transform(xs, s -> named_struct('p', s.position, 'y', "
           f"try_divide({target_prob('s.position', 's.ad_id')}, s.propensity)))")
    wide = "".join(f", named_struct('j', {q}, 'k', x.p, 'v', (Y_{q} - 1D) * (x.y - 1D), 'y', x.y)"
                   for q in range(1, Kw + 1))
    own = ("named_struct('j', 0, 'k', x.p, 'v', x.y - 1D, 'y', x.y), "
           "named_struct('j', x.p, 'k', x.p, 'v', (x.y - 1D) * (x.y - 1D), 'y', x.y)")
    others = ("transform(filter(xys, o -> o.p < x.p), "
              "o -> named_struct('j', o.p, 'k', x.p, 'v', (o.y - 1D) * (x.y - 1D), 'y', x.y))")
    return f"""
SELECT dt, policy_id, logging_policy, fold, e.j AS j, e.k AS k, count(1) AS n, sum(e.v) AS s_v,
  sum(r * e.v) AS s_rv, sum(r * r * e.v) AS s_r2v, max(e.y) AS max_y,
  CAST(sum(CASE WHEN e.y > 0 THEN 1 ELSE 0 END) AS BIGINT) AS n_pos
FROM (
  SELECT dt, policy_id, logging_policy, fold, r, explode(concat(array({own}{wide}), {others})) AS e
  FROM (
    SELECT a.*, explode(xys) AS x
    FROM (SELECT dt, policy_id, logging_policy, fold, r{", " + ys if Kw else ""}, {xys} AS xys
          FROM scv_joined WHERE clean AND NOT miss AND xs IS NOT NULL) a
  ) b
) c
GROUP BY dt, policy_id, logging_policy, fold, e.j, e.k"""


def policy_ads(Kw: int) -> str:
    """(dt, policy_id, ad_id): m = impressions of the ad at any position, m_r = those whose slot reward is known,
    c, c2 = sums of the known slot rewards and their squares, ev = sum over the impressions of 1 / (slots the event
    holds) (as ad_position's ev: summed over the ads of an eligibility stratum, its events), over the events the
    policy has a (clean) decision for. The factored estimator's T_a = m_r (the impressions its sums S_a run over: a
    null slot reward is unknown, no 0 click) and stratum weights T_s / T (ev: events, whatever their rewards) and
    the re-ordering lift's logged clicks of that policy: over the window's every event (ad_position), a target
    whose decisions cover part of the log was scaled down by that share (and its strata weighted by their share of
    the whole log)."""
    from .logs import held_slots

    return f"""
SELECT dt, policy_id, s.ad_id AS ad_id, CAST(count(1) AS BIGINT) AS m, CAST(count(s.reward) AS BIGINT) AS m_r,
  coalesce(sum(s.reward), 0D) AS c, coalesce(sum(s.reward * s.reward), 0D) AS c2, sum(ew) AS ev
FROM (SELECT dt, policy_id, 1D / greatest(n_slots, 1) AS ew, explode({held_slots(Kw)}) AS s
      FROM scv_joined WHERE clean) x
WHERE s.ad_id IS NOT NULL
GROUP BY dt, policy_id, s.ad_id"""


def held_at(pos: str, Kw: int) -> str:
    """Whether the flat row holds position ``pos`` (an integer expression): a wide column a_k, or an extra slot."""
    extra = f"coalesce(size(filter(xs, z -> z.position = {pos})) > 0, false)"
    if not Kw:
        return extra
    whens = " ".join(f"WHEN {k} THEN a_{k} IS NOT NULL" for k in range(1, Kw + 1))
    return f"CASE {pos} {whens} ELSE {extra} END"


def factored(Kw: int) -> str:
    """(dt, policy_id, ad_id, pos_i, pos_j, pos_j2) over logged slots (ad a at position i) with a known nonzero
    reward (a null one is unknown: left out, as policy_ads' m_r leaves it out of T_a), in long form: for each
    entry of the decision showing the slot's ad at a position j THE ROW HOLDS (q = its probability > 0 at j),
    pos_j2 = 0: s_1 = sum r q_j, s_2 = sum r^2 q_j; for each pair of such entries (j, j2): s_2 = sum r^2 q_j q_j2.
    Only held positions: the estimate is the target's value per logged event, over the positions the event holds
    (a one-slot row of the Open Bandit Dataset values the target's ad at that slot, as IPS does, not its whole
    slate); full slates hold every position, so nothing changes for them.
    Split on the driver into the ``factored`` and ``factored_sq`` tables (seed 001 section 4.2): the rows grow
    with the entries that show the ad, not with K."""
    from .logs import held_slots

    ks = range(1, Kw + 1)
    cand = ", ".join(f"named_struct('j', {k}, 'q', CASE WHEN d_a_{k} = s.ad_id AND a_{k} IS NOT NULL THEN d_p_{k} END)"
                     for k in ks)
    simple = f"filter(array({cand}), e -> e.q > 0)" if Kw else "CAST(NULL AS ARRAY<STRUCT<j: INT, q: DOUBLE>>)"
    listed = (f"transform(filter(dslots, x -> x.ad_id = s.ad_id AND x.probability > 0 AND {held_at('x.position', Kw)}), "
              "x -> named_struct('j', x.position, 'q', x.probability))")
    singles = "transform(qs, u -> named_struct('j', u.j, 'j2', 0, 'v', u.q))"
    pairs = "flatten(transform(qs, u -> transform(qs, o -> named_struct('j', u.j, 'j2', o.j, 'v', u.q * o.q))))"
    clicked = " OR ".join([f"coalesce(w_{k}, 0D) <> 0D" for k in ks] + ["xs IS NOT NULL"])
    return f"""
SELECT dt, policy_id, ad_id, pos_i, e.j AS pos_j, e.j2 AS pos_j2, sum(rew * e.v) AS s_1, sum(rew * rew * e.v) AS s_2
FROM (
  SELECT dt, policy_id, ad_id, pos_i, rew, explode(concat({singles}, {pairs})) AS e
  FROM (
    SELECT dt, policy_id, s.ad_id AS ad_id, s.position AS pos_i, s.reward AS rew,
      CASE WHEN simple THEN {simple} ELSE {listed} END AS qs
    FROM (SELECT dt, policy_id, simple, dslots, xs{"".join(f", a_{k}, d_a_{k}, d_p_{k}" for k in ks)},
            explode({held_slots(Kw)}) AS s
          FROM scv_joined WHERE clean AND ({clicked})) x
    WHERE s.ad_id IS NOT NULL AND s.reward IS NOT NULL AND s.reward <> 0D
  ) q
) p
GROUP BY dt, policy_id, ad_id, pos_i, e.j, e.j2"""


def target_placements(Kw: int) -> str:
    """(dt, policy_id, logging_policy, ad_id, pos_j): s_p = sum over events of pi(ad at j | x), the target's
    expected placements (with T_a: its mass on ads never logged; checks b and c: its mass per logging policy).
    Events with the same decision are counted first, so a target that repeats its slates explodes each once."""
    from .decisions import decision_slots

    d_cols = ", ".join(f"d_a_{k}, d_p_{k}" for k in range(1, Kw + 1))
    keys = f"dt, policy_id, logging_policy, dslots{', ' + d_cols if d_cols else ''}"
    return f"""
SELECT dt, policy_id, logging_policy, x.ad_id AS ad_id, x.position AS pos_j, sum(x.probability * n) AS s_p
FROM (
  SELECT dt, policy_id, logging_policy, n, explode({decision_slots(Kw)}) AS x
  FROM (SELECT {keys}, count(1) AS n FROM scv_joined WHERE clean GROUP BY {keys}) d
) e
WHERE x.probability > 0
GROUP BY dt, policy_id, logging_policy, x.ad_id, x.position"""


def reorder_pairs(Kw: int) -> str:
    """(dt, policy_id, pos_i, pos_j, pos_k, pos_j2): s_v = sums over events (a clean, deterministic decision with a
    logged click) of products of two terms of the event's rewarded slots i, k (i = k included; a slot whose
    reward is null, unknown, is none of them). A slot at position
    p with reward r gives the terms (j, v) = (0, r) and, for each entry of the decision showing its ad at j with
    probability q > 0, (j, r q). Rows with pos_j > 0: the event's X_t^2 = sum r_i q_ij r_k q_kj2 C_j C_j2 / (C_i C_k)
    term by term (pos_j2 > 0), and X_t R_t (pos_j2 = 0, R_t the event's logged clicks); pos_j = pos_j2 = 0: R_t^2.
    The re-ordering estimate's event-level variance (estimators/reordering.py): the slots of an event share its
    user and decision, so the units are events, not impressions. Deterministic decisions and re-orderings of the
    logged slate (:func:`_reorders`, the events the re-ordering estimator reads), so the rows grow as
    (K (K + 1))^2 at most per policy."""
    from .logs import held_slots

    ks = range(1, Kw + 1)
    cand = ", ".join(f"named_struct('j', {k}, 'q', CASE WHEN d_a_{k} = s.ad_id THEN d_p_{k} END)" for k in ks)
    simple = f"filter(array({cand}), e -> e.q > 0)" if Kw else "CAST(NULL AS ARRAY<STRUCT<j: INT, q: DOUBLE>>)"
    listed = ("transform(filter(dslots, x -> x.ad_id = s.ad_id AND x.probability > 0), "
              "x -> named_struct('j', x.position, 'q', x.probability))")
    terms = (f"flatten(transform(filter(sl, s -> s.ad_id IS NOT NULL AND coalesce(s.reward <> 0D, false)), "
             f"s -> concat(array(named_struct('p', s.position, 'j', 0, 'v', s.reward)), "
             f"transform(CASE WHEN simple THEN {simple} ELSE {listed} END, "
             f"u -> named_struct('p', s.position, 'j', u.j, 'v', s.reward * u.q)))))")
    pairs = ("flatten(transform(ts, u -> transform(filter(ts, o -> u.j > 0 OR o.j = 0), "
             "o -> named_struct('i', u.p, 'j', u.j, 'k', o.p, 'j2', o.j, 'v', u.v * o.v))))")
    clicked = " OR ".join([f"coalesce(w_{k}, 0D) <> 0D" for k in ks] + ["xs IS NOT NULL"])
    return f"""
SELECT dt, policy_id, e.i AS pos_i, e.j AS pos_j, e.k AS pos_k, e.j2 AS pos_j2, sum(e.v) AS s_v
FROM (
  SELECT dt, policy_id, explode({pairs}) AS e
  FROM (
    SELECT dt, policy_id, {terms} AS ts
    FROM (SELECT dt, policy_id, simple, dslots{"".join(f", d_a_{k}, d_p_{k}" for k in ks)},
            {held_slots(Kw)} AS sl
          FROM scv_joined WHERE clean AND ({clicked}) AND (det OR {_reorders(Kw)})) x
  ) y
) z
GROUP BY dt, policy_id, e.i, e.j, e.k, e.j2"""
