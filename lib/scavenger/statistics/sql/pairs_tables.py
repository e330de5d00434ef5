"""The per-day table of target-minus-baseline differences (``evaluate --baseline POLICY``): the sums of
products of two policies' per-event weights on the events both decide, from a self-join of the joined rows
(scv_joined, clean rows, which then carry their event ids) on the event.

Per event held by both the target a and the baseline b (every held propensity logged), with D_k = Y_k - 1
(Y_k = pi_k(a_k|x)/mu_k(a_k|x), so D_k = 0 at a position the row does not hold: a day whose rows hold fewer
positions merges as rows with D = 0 there) and W = prod_k Y_k, the vector

    v = (1, Da_1..Da_P, Db_1..Db_P, Wa, Wb),   P = min(Kw, PAIR_POSITIONS)

and the sums s{p}_{i}_{j} = sum r^p v_i v_j (p = 0, 1, 2; i <= j by the order above, columns named by the
elements: c, a1.., b1.., wa, wb). Every per-event term of the IPS/PI family of either policy, and their difference,
is linear in (r v, v), so these give its sum and sum of squares (estimators/pair_differences.py). Events of the
target the baseline does not decide (n_unpaired), with a missing propensity (n_missing_propensity), or holding a
position beyond P (n_long) are counted, not summed.
"""
from __future__ import annotations

PAIR_POSITIONS = 8      # positions 1..8 at most: (2P + 3)(2P + 4)/2 products a power of r, 570 columns at P = 8


def elements(P: int) -> list[str]:
    """The names of v's elements, in order."""
    return ["c", *(f"a{k}" for k in range(1, P + 1)), *(f"b{k}" for k in range(1, P + 1)), "wa", "wb"]


def pair_columns(P: int) -> list[str]:
    """The sum columns of the pair moments for P positions: s{p}_{i}_{j}, i <= j in elements() order."""
    names = elements(P)
    return [f"s{p}_{names[i]}_{names[j]}" for p in (0, 1, 2) for i in range(len(names)) for j in range(i, len(names))]


def _value(name: str) -> str:
    """The SQL value of element ``name`` on a paired row (target columns y_k, w; baseline columns b_y_k, b_w)."""
    if name == "c":
        return ""
    if name == "wa":
        return "w"
    if name == "wb":
        return "b_w"
    side, k = name[0], name[1:]
    return f"(y_{k} - 1D)" if side == "a" else f"(b_y_{k} - 1D)"


def pair_moments(Kw: int, baseline: str) -> str:
    """(dt, policy_id, baseline_id, fold): n (paired events summed), n_unpaired, n_missing_propensity, n_long, and
    the sums of the module docstring, every target policy other than ``baseline`` against it."""
    from .decision_tables import _weights
    from .literals import text

    P = min(Kw, PAIR_POSITIONS)
    wprod = " * ".join([f"Y_{k}" for k in range(1, Kw + 1)] + ["xw"])
    beyond = " OR ".join(["xs IS NOT NULL", *(f"a_{k} IS NOT NULL" for k in range(P + 1, Kw + 1))])
    ys = "".join(f", Y_{k} AS y_{k}" for k in range(1, P + 1))
    b_ys = "".join(f", y_{k} AS b_y_{k}" for k in range(1, P + 1))
    sums = []
    names = elements(P)
    for p, rp in ((0, ""), (1, "r * "), (2, "r * r * ")):
        for i in range(len(names)):
            for j in range(i, len(names)):
                prod = " * ".join(v for v in (_value(names[i]), _value(names[j])) if v) or "1D"
                sums.append(f"sum(CASE WHEN ok THEN {rp}{prod} END) AS s{p}_{names[i]}_{names[j]}")
    sums_sql = ",\n  ".join(sums)
    base = text(baseline)
    return f"""
WITH y AS (
  SELECT dt, policy_id, event_id, fold, r, miss, {beyond} AS long{ys}, {wprod} AS w
  FROM (SELECT dt, policy_id, event_id, fold, r, miss, xs{"".join(f", a_{k}" for k in range(1, Kw + 1))},
          {_weights(Kw)}
        FROM scv_joined WHERE clean) j
), b AS (
  SELECT dt AS b_dt, event_id AS b_event_id, miss AS b_miss{b_ys}, w AS b_w FROM y WHERE policy_id = {base}
), p AS (
  SELECT y.*, b.*, b.b_event_id IS NOT NULL AND NOT miss AND NOT b_miss AND NOT long AS ok
  FROM y LEFT JOIN b ON y.event_id = b.b_event_id AND y.dt = b.b_dt
  WHERE y.policy_id <> {base}
)
SELECT dt, policy_id, {base} AS baseline_id, fold,
  CAST(sum(CASE WHEN ok THEN 1 ELSE 0 END) AS BIGINT) AS n,
  CAST(sum(CASE WHEN b_event_id IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS n_unpaired,
  CAST(sum(CASE WHEN b_event_id IS NOT NULL AND (miss OR b_miss) THEN 1 ELSE 0 END) AS BIGINT)
    AS n_missing_propensity,
  CAST(sum(CASE WHEN b_event_id IS NOT NULL AND NOT miss AND NOT b_miss AND long THEN 1 ELSE 0 END) AS BIGINT)
    AS n_long,
  {sums_sql}
FROM p
GROUP BY dt, policy_id, fold"""
