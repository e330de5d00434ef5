"""The ranking family's per-day tables (estimators/ranking.py, the sums declared in
estimators/ranking_sums.py): three statements, Spark SQL that DuckDB runs through sqlglot.

    ranking_sums(Kw)     decision side, over scv_joined (clean rows): per (dt, policy_id, logging_policy, fold) the
                         sums of IIPS, RIPS and their self-normalized forms (ranking_sums.sum_terms, wide aliases;
                         ranking_sums.to_long lays them out per (k, l)). One aggregation over the same rows and keys
                         as decision_tables.policy_groups, so it can join that one later (it reads the slot rewards
                         w_k: scv_joined must carry them, Table.slot_rewards).
    reward_to_go(Kw)     log side, over scv_flat: per (dt, fold, position, ad_id) m = slots logged, s_rtg = sum of
                         their reward-to-go (the known slot rewards of the row from that position on): Cascade-DR's
                         model (estimators/ranking.reward_model turns it into the relation scv_q).
    cascade_dr(Kw)       decision side, over scv_joined and scv_q (dt, fold, position, ad_id, q; ad_id null: the
                         position's default, estimators/ranking.reward_model): per (dt, policy_id, logging_policy,
                         fold) n, s_d, s_d2 of the per-event term D and per position s_dk, s_d2k, s_vd, s_vpd of its
                         parts d_k (estimators/ranking_sums.py). The model's values are looked up by joins on the row's
                         own columns (the logged ad, the one-entry decision's ad: two small joins per position up to
                         DR_CAP), and for listed decisions once per distinct list: the row stays one row, so D and
                         D^2 are exact per event without an event key (scv_joined keeps none for clean rows). An
                         explode of every event's lookups, summed back per event under a uuid() key, was exact too
                         but took 6-7x policy_groups' time (DuckDB, 4M joined rows, 3 positions, a loaded 2-core
                         machine: 30-45 s against 4.8-6.7 s); these joins about 1x (3.4 s against 2.9-3.6 s in the
                         same run, ranking_sums 2.7 s, reward_to_go 1.0 s).

Positions beyond the wide columns (the rows' extra slots ``xs``) enter T^I and T^R (so the plain IIPS and RIPS count
them) but no per-position sum and no Cascade-DR control variate (D stays unbiased: its control variates have mean 0);
n_beyond counts the rows holding any.
"""
from __future__ import annotations

from ...estimators.ranking_sums import CROSS_CAP, sum_terms  # noqa: F401 - CROSS_CAP: the pairs' cap

DR_CAP = 8   # Cascade-DR's control variates at positions 1..8 (two joins each); beyond, d_k = A^R_k


def _ks(Kw: int):
    return range(1, Kw + 1)


def _slot_symbols(Kw: int) -> str:
    """y_k = pi_k(a_k|x) / mu_k(a_k|x), null where position k gives no weight (not held, or no propensity)."""
    from .decisions import wide_target_prob

    return ", ".join(f"try_divide({wide_target_prob(k)}, mu_{k}) AS y_{k}" for k in _ks(Kw))


def _item_symbols(Kw: int) -> str:
    """VI_k = v_k; P_k: 1 where y_k is defined; H_k: 1 where the slot reward is known; R_k: the reward (0 unknown)."""
    return ", ".join(f"coalesce(y_{k}, 1D) AS VI{k}, CASE WHEN y_{k} IS NULL THEN 0D ELSE 1D END AS P{k}, "
                     f"CASE WHEN w_{k} IS NULL THEN 0D ELSE 1D END AS H{k}, coalesce(w_{k}, 0D) AS R{k}"
                     for k in _ks(Kw))


def _weights(Kw: int) -> str:
    """UI_k = u_k, BI_k, AI_k; G_k: 1 where positions 1..k all give a weight (the usable prefix); VR_k = V_k."""
    cols = []
    for k in _ks(Kw):
        cols += [f"P{k} * H{k} AS UI{k}", f"P{k} * H{k} * VI{k} AS BI{k}", f"P{k} * H{k} * VI{k} * R{k} AS AI{k}",
                 f"{' * '.join(f'P{j}' for j in range(1, k + 1))} AS G{k}",
                 f"{' * '.join(f'VI{j}' for j in range(1, k + 1))} AS VR{k}"]
    return ", ".join(cols)


def _prefix_symbols(Kw: int) -> str:
    """UR_k = g_k, BR_k, AR_k."""
    return ", ".join(f"G{k} * H{k} AS UR{k}, G{k} * H{k} * VR{k} AS BR{k}, G{k} * H{k} * VR{k} * R{k} AS AR{k}"
                     for k in _ks(Kw))


def _extras(Kw: int) -> str:
    """xi: T^I of the extra slots; xr: (ok, t) of their prefix, which continues the wide one while their positions
    run Kw + 1, Kw + 2, ... with a propensity each (t: their T^R terms). Only rows holding extras evaluate them."""
    from .decisions import target_prob

    y = f"try_divide({target_prob('s.position', 's.ad_id')}, s.propensity)"
    xi = (f"CASE WHEN xs IS NULL THEN 0D ELSE coalesce(aggregate(xs, 0D, (acc, s) -> acc + CASE WHEN s.propensity "
          f"IS NOT NULL AND s.reward IS NOT NULL THEN {y} * s.reward ELSE 0D END), 0D) END AS xi")
    w0, full = (f"VR{Kw}", f"G{Kw} > 0D") if Kw else ("1D", "true")
    ok = "acc.ok AND s.position = acc.p + 1 AND s.propensity IS NOT NULL"
    xr = (f"CASE WHEN xs IS NOT NULL THEN aggregate(xs, named_struct('w', {w0}, 'ok', {full}, 'p', {Kw}, 't', 0D), "
          f"(acc, s) -> named_struct('w', acc.w * coalesce({y}, 0D), 'ok', {ok}, 'p', s.position, 't', acc.t + "
          f"CASE WHEN {ok} AND s.reward IS NOT NULL THEN acc.w * coalesce({y}, 0D) * s.reward ELSE 0D END)) "
          f"END AS xr")
    return f"{xi}, {xr}"


def _rows(Kw: int, columns: str) -> str:
    """Every clean joined row with the symbols (``columns``: the scv_joined columns kept): no_prefix (position 1
    gives no weight), broken (a held position after the first that gives none: a gap or a missing propensity)."""
    ti = " + ".join([f"AI{k}" for k in _ks(Kw)] + ["xi"])
    tr = " + ".join([f"AR{k}" for k in _ks(Kw)] + ["coalesce(xr.t, 0D)"])
    if Kw:
        after = [f"(a_{k} IS NOT NULL AND G{k} = 0D)" for k in range(2, Kw + 1)]
        after.append(f"(xs IS NOT NULL AND (G{Kw} = 0D OR NOT coalesce(xr.ok, false)))")
        broken, first = f"P1 > 0D AND ({' OR '.join(after)})", "P1 > 0D"
    else:
        broken, first = "false", "false"
    return f"""
SELECT s3.*, {ti} AS TI, {tr} AS TR, NOT ({first}) AS no_prefix, {broken} AS broken
FROM (SELECT s2.*, {f"{_prefix_symbols(Kw)}, " if Kw else ''}{_extras(Kw)}
      FROM (SELECT s1.*{', ' + _weights(Kw) if Kw else ''}
            FROM (SELECT s0.*{', ' + _item_symbols(Kw) if Kw else ''}
                  FROM (SELECT {columns}{', ' + _slot_symbols(Kw) if Kw else ''} FROM scv_joined WHERE clean) s0
                 ) s1) s2) s3"""


def _joined_columns(Kw: int) -> str:
    cols = ["dt", "policy_id", "logging_policy", "fold", "miss", "xs", "simple", "dslots"]
    cols += [f"{c}_{k}" for k in _ks(Kw) for c in ("a", "mu", "w", "d_a", "d_p")]
    return ", ".join(cols)


def _product(factors) -> str:
    """A product of ranking_sums' symbols as SQL: VPk (= V_{k-1}) is VR{k-1}, 1 at k = 1."""
    out = [("1D" if f == "VP1" else f"VR{int(f[2:]) - 1}") if f.startswith("VP") else f for f in factors]
    return " * ".join(out)


def ranking_sums(Kw: int) -> str:
    """(dt, policy_id, logging_policy, fold): n, the counts (n_missing_propensity: a held slot without a propensity;
    n_no_prefix: position 1 not held or without one, no cascade prefix; n_broken_prefix: a held position past the
    usable prefix; n_beyond: extra slots beyond Kw) and every sum of ranking_sums.sum_terms(Kw)."""
    sums = ",\n  ".join(f"sum({_product(f)}) AS {alias}" for alias, _, _, _, f in sum_terms(Kw))
    return f"""
SELECT dt, policy_id, logging_policy, fold, CAST(count(1) AS BIGINT) AS n,
  CAST(sum(CASE WHEN miss THEN 1 ELSE 0 END) AS BIGINT) AS n_missing_propensity,
  CAST(sum(CASE WHEN no_prefix THEN 1 ELSE 0 END) AS BIGINT) AS n_no_prefix,
  CAST(sum(CASE WHEN broken THEN 1 ELSE 0 END) AS BIGINT) AS n_broken_prefix,
  CAST(sum(CASE WHEN xs IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS n_beyond,
  {sums}
FROM ({_rows(Kw, _joined_columns(Kw))}) r
GROUP BY dt, policy_id, logging_policy, fold"""


def reward_to_go(Kw: int) -> str:
    """(dt, fold, position, ad_id): m = logged slots, s_rtg = sum over them of the row's known slot rewards at that
    position and after (a null reward, unknown, counts 0), over scv_flat (every logging policy)."""
    from .logs import held_slots

    rtg = ("transform(sl, x -> named_struct('position', x.position, 'ad_id', x.ad_id, 'rtg', "
           "aggregate(filter(sl, o -> o.position >= x.position), 0D, (acc, o) -> acc + coalesce(o.reward, 0D))))")
    return f"""
SELECT dt, fold, e.position AS position, e.ad_id AS ad_id, CAST(count(1) AS BIGINT) AS m, sum(e.rtg) AS s_rtg
FROM (SELECT dt, fold, explode({rtg}) AS e
      FROM (SELECT dt, fold, filter({held_slots(Kw)}, s -> s.ad_id IS NOT NULL) AS sl FROM scv_flat) f) x
GROUP BY dt, fold, e.position, e.ad_id"""


def _target_terms(Kw: int) -> str:
    """dv: per listed decision (several entries at a position; ``dslots``) of a (dt, fold), its E_k =
    sum_a pi_k(a|x) q_k(a) at each position k <= the model's positions: the decisions are exploded once each, not
    once per event (a target that repeats its lists, as a context-based one does, costs its distinct lists)."""
    m = min(Kw, DR_CAP)
    es = ", ".join(f"sum(CASE WHEN k = {k} THEN e ELSE 0D END) AS E{k}" for k in range(1, m + 1))
    return f"""
  SELECT dt, fold, ds, {es}
  FROM (SELECT u.dt, u.fold, u.ds, u.x.position AS k, sum(u.x.probability * coalesce(q.q, q0.q, 0D)) AS e
        FROM (SELECT dt, fold, ds, explode(filter(ds, x -> x.probability > 0 AND x.position >= 1
                AND x.position <= {m})) AS x
              FROM (SELECT DISTINCT dt, fold, dslots AS ds FROM scv_joined WHERE clean AND NOT simple) d0) u
        LEFT JOIN scv_q q ON q.dt = u.dt AND q.fold = u.fold AND q.position = u.x.position AND q.ad_id = u.x.ad_id
        LEFT JOIN (SELECT dt, fold, position, q FROM scv_q WHERE ad_id IS NULL) q0
          ON q0.dt = u.dt AND q0.fold = u.fold AND q0.position = u.x.position
        GROUP BY u.dt, u.fold, u.ds, u.x.position) e
  GROUP BY dt, fold, ds"""


def cascade_dr(Kw: int) -> str:
    """(dt, policy_id, logging_policy, fold): n, s_d, s_d2 of D = T^R + sum_k c_k and per wide position k
    s_dk_k, s_d2k_k, s_vd_k, s_vpd_k of d_k = A^R_k + c_k, with the control variate
    c_k = g'_k (V_{k-1} E_k - V_k q_k(a_k)) at the positions k <= DR_CAP (0 beyond: D stays unbiased). q_k(a_k) and,
    for a one-entry-per-position decision, E_k = pi_k q_k(its ad) are looked up by joins on the row's columns (two
    per position); a listed decision's E_k comes from :func:`_target_terms`; an ad scv_q does not list gets its
    position's default (the row with a null ad_id)."""
    ks, m = _ks(Kw), min(Kw, DR_CAP)
    q0 = ", ".join(f"max(CASE WHEN position = {k} THEN q END) AS q0_{k}" for k in range(1, m + 1)) or "0D AS q0"
    joins = "".join(f"""
  LEFT JOIN scv_q q{k} ON q{k}.dt = r.dt AND q{k}.fold = r.fold AND q{k}.position = {k} AND q{k}.ad_id = r.a_{k}
  LEFT JOIN scv_q t{k} ON t{k}.dt = r.dt AND t{k}.fold = r.fold AND t{k}.position = {k} AND t{k}.ad_id = r.d_a_{k}"""
                    for k in range(1, m + 1))
    cv = []
    for k in range(1, m + 1):
        prev = "1D" if k == 1 else f"VR{k - 1}"
        e = (f"CASE WHEN simple THEN coalesce(d_p_{k} * coalesce(t{k}.q, z.q0_{k}), 0D) "
             f"ELSE coalesce(dv.E{k}, 0D) END")
        cv.append(f"G{k} * ({prev} * {e} - VR{k} * coalesce(q{k}.q, z.q0_{k}, 0D)) AS c{k}")
    keep = ", ".join(f"AR{k}, VR{k}" for k in ks)
    total = " + ".join(["TR", *(f"c{k}" for k in range(1, m + 1))])
    parts = "".join(f",\n  sum({d}) AS s_dk_{k}, sum({d} * {d}) AS s_d2k_{k}, sum(VR{k} * {d}) AS s_vd_{k}, "
                    f"sum({'1D' if k == 1 else f'VR{k - 1}'} * {d}) AS s_vpd_{k}"
                    for k in ks for d in [f"(AR{k} + c{k})" if k <= m else f"AR{k}"])
    listed = f"LEFT JOIN ({_target_terms(Kw)}\n) dv ON dv.dt = r.dt AND dv.fold = r.fold AND dv.ds = r.dslots" \
        if m else ""
    cols = "".join([f", {keep}" if Kw else "", *(f", {c}" for c in cv)])
    return f"""
SELECT dt, policy_id, logging_policy, fold, CAST(count(1) AS BIGINT) AS n, sum(D) AS s_d, sum(D * D) AS s_d2{parts}
FROM (SELECT c.*, {total} AS D
      FROM (SELECT r.dt, r.policy_id, r.logging_policy, r.fold, TR{cols}
            FROM ({_rows(Kw, _joined_columns(Kw))}) r
            {listed}
            LEFT JOIN (SELECT dt, fold, {q0} FROM scv_q WHERE ad_id IS NULL GROUP BY dt, fold) z
              ON z.dt = r.dt AND z.fold = r.fold{joins}) c) d
GROUP BY dt, policy_id, logging_policy, fold"""
