"""Check f's per-day table: the reward at position k against the ad at each position j < k, from the clean flat
events (scv_flat), within (day, logging policy, fold, context_id, ad at k) strata (checks/check_f.py).

Additive slots mean E[w_k | x, A] = f_k(x, a_k): given the context and the ad at k, the reward at k does not depend
on the ad at j. A cascade (a click above takes the click below) makes it depend on a_j. The strata hold x (as
context_id) and a_k fixed, so the null holds whatever the logger does: one whose choice at j depends on the context
(while rewards do too), or a ranked layout whose slot k cannot repeat slot j's ad (a_k then depends on a_j, and so
would w_k without any interaction), shows no dependence by itself.

Per stratum s (dt, logging_policy, fold, context_id, j, k, a_k) and ad g at j: n_gs events with a known reward at
k, S_gs and Q_gs the sums of w_k and w_k^2; n_s, S_s, Q_s over the stratum's ads; c_s = (Q_s - S_s^2/n_s) /
(n_s - 1), the stratum's variance (n_s >= 2). Summed over the strata, a value per (day, fold, j, ad, k), so the
table is small whatever the number of contexts and ads (no per-stratum row is kept):
    d_g = sum_s (S_gs - n_gs S_s / n_s)                   the ad's deviation from its strata's means
    v_g = sum_s n_gs c_s                                  (a diagonal of) the deviations' variance
    t_g = sum_s (S_gs - n_gs S_s / n_s) (x_gs - xbar_s)    the click-rate trend's numerator ...
    vt_g = sum_s c_s n_gs x_gs (x_gs - xbar_s)            ... its exact permutation variance (summed over g)
    sxx_g = sum_s n_gs x_gs (x_gs - xbar_s)               ... and sum (x - xbar)^2 (the slope's denominator)
with x_gs the ad's click rate at j in the same (day, policy, context) from the other fold (the md5 halves of
event_id: fixed before this fold's rewards are seen) and xbar_s = sum_g n_gs x_gs / n_s (x - xbar is 0 where x is
the same for every ad of the stratum). A cascade lowers the reward at k after the ads clicked most at j in their
context, whichever they are: the trend sees it where the ads' click rates change from context to context and
their deviations d_g cancel over the strata. checks/check_f.py forms both statistics. A stratum of one event tests
nothing (its terms are 0; n_tested leaves it out). n_j, s_j: the events' known rewards at j (the ad's click rate,
which ranks many ads into click-rate groups).
"""
from __future__ import annotations

# positions 1..P with P = min(the wide positions, INTERACTION_POSITIONS), the positions every pass holds as wide
# columns (scan.WIDE_MIN) and where most clicks are: P(P-1)/2 <= 6 pairs; the positions below P are left out
INTERACTION_POSITIONS = 4
COLUMNS = ("dt", "logging_policy", "fold", "j", "ad_id", "k", "n", "s_r", "s_r2", "n_tested", "d", "v", "t", "vt",
           "sxx", "n_j", "s_j")


def interaction_positions(Kw: int) -> int:
    return min(int(Kw), INTERACTION_POSITIONS)


def _score() -> str:
    """x, the ad's click rate at j in the context from the other fold (its events only, so x is fixed before this
    fold's rewards are seen); where the other fold does not show the ad there, that fold's click rate at j over the
    context's ads; where it shows none, 0. By window over the (j, j + 1) pair rows of the same (day, policy,
    context, j): their n_ja, s_ja count every event showing an ad at j once."""
    def other(col: str, zero: str, by: str) -> str:
        w = f"PARTITION BY dt, logging_policy, cs, j{by}"
        return (f"CASE WHEN fold = 0 THEN sum(CASE WHEN fold = 1 AND k = j + 1 THEN {col} ELSE {zero} END) "
                f"OVER ({w}) ELSE sum(CASE WHEN fold = 0 AND k = j + 1 THEN {col} ELSE {zero} END) OVER ({w}) END")

    cx_n, cx_s, ad_n, ad_s = (other(c, z, by) for by in ("", ", ad_id") for c, z in (("n_ja", "0"), ("s_ja", "0D")))
    return f"CASE WHEN {ad_n} > 0 THEN {ad_s} / {ad_n} WHEN {cx_n} > 0 THEN {cx_s} / {cx_n} ELSE 0D END"


def interaction_cells(Kw: int) -> str:
    """(dt, logging_policy, fold, j, ad_id, k) for j < k <= min(Kw, INTERACTION_POSITIONS), over check d's
    scv_pair_cells (statistics/sql/log_tables.pair_cells: one aggregation for both checks): n events showing ad_id
    at j and a known reward at k, s_r and s_r2 (sums of w_k, w_k^2), n_tested (those in strata of two events or
    more), d, v, t, vt, sxx (module doc), n_j and s_j (the events' known rewards of ad_id at j: its click rate,
    check f's ad groups). Empty (and typed) when fewer than two positions are wide. The scores and the strata's
    sums by window over the pair rows (no join: one pipeline of small exchanges on Spark)."""
    P = interaction_positions(Kw)
    if P < 2:
        return ("SELECT dt, logging_policy, fold, 1 AS j, a_1 AS ad_id, 2 AS k, CAST(0 AS BIGINT) AS n, 0D AS s_r, "
                "0D AS s_r2, CAST(0 AS BIGINT) AS n_tested, 0D AS d, 0D AS v, 0D AS t, 0D AS vt, 0D AS sxx, "
                "CAST(0 AS BIGINT) AS n_j, 0D AS s_j FROM scv_flat WHERE 1 = 0")
    st = "PARTITION BY dt, logging_policy, fold, cs, j, k, b"
    tested = "CASE WHEN nn >= 2 THEN {} ELSE 0D END"
    dev = "(s - ss * (CAST(n AS DOUBLE) / nn))"
    per_fold = ", ".join(f"named_struct('fold', {f}, 'n', n_w{f}, 's', s{f}, 'q', q{f}, 'n_j', n_j{f}, 's_j', "
                         f"s_j{f}, 'n_ja', n_ja{f}, 's_ja', s_ja{f})" for f in (0, 1))
    pairs = (f"SELECT dt, logging_policy, cs, j, k, ad_id, b, e.fold AS fold, e.n AS n, e.s AS s, e.q AS q, "
             f"e.n_j AS n_j, e.s_j AS s_j, e.n_ja AS n_ja, e.s_ja AS s_ja\n"
             f"      FROM (SELECT dt, logging_policy, stratum AS cs, j, k, a AS ad_id, b, explode(array({per_fold})) "
             f"AS e FROM scv_pair_cells WHERE k <= {P}) u")
    return f"""
SELECT dt, logging_policy, fold, j, ad_id, k, CAST(sum(n) AS BIGINT) AS n, sum(s) AS s_r, sum(q) AS s_r2,
  CAST(sum(CASE WHEN nn >= 2 THEN n ELSE 0 END) AS BIGINT) AS n_tested,
  sum({tested.format(dev)}) AS d, sum({tested.format("n * c")}) AS v,
  sum({tested.format(dev + " * xc")}) AS t, sum({tested.format("c * n * x * xc")}) AS vt,
  sum({tested.format("n * x * xc")}) AS sxx,
  CAST(sum(n_j) AS BIGINT) AS n_j, sum(s_j) AS s_j
FROM (
  SELECT w.*,
    CASE WHEN nn >= 2 THEN greatest(qq - ss * ss / nn, 0D) / (nn - 1) ELSE 0D END AS c,
    CASE WHEN x_min = x_max THEN 0D ELSE x - nx / nn END AS xc
  FROM (
    SELECT sc.*, sum(n) OVER ({st}) AS nn, sum(s) OVER ({st}) AS ss, sum(q) OVER ({st}) AS qq,
      sum(n * x) OVER ({st}) AS nx, min(x) OVER ({st}) AS x_min, max(x) OVER ({st}) AS x_max
    FROM (SELECT * FROM (SELECT pc.*, {_score()} AS x FROM ({pairs}) pc) scored WHERE n > 0) sc
  ) w
) terms
GROUP BY dt, logging_policy, fold, j, ad_id, k"""
