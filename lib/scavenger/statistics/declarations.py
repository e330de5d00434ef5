"""Every per-day statistics table declared once: its statement, its keys, its merge rule per column, its side (the
logs' or the decisions'), and when a scan makes it. The scan loops over these declarations (``scan.py``), the plan
picks among them (``plan.py``), the merge reads their rules (``tables.py``), the store and the window their keys.

Adding a per-day table takes one declaration here and its statement in ``statistics/sql``:

    def policy_weights(Kw):                                # statistics/sql/decision_tables.py
        return "SELECT dt, policy_id, count(1) AS n, sum(...) AS s_W FROM scv_joined WHERE clean GROUP BY ..."

    Table("policy_weights", "decision", keys=("policy_id",), sql=lambda s: DT.policy_weights(s.Kw))

and its name in the ``tables`` of the estimators that read it (registry), or in ``checks.assumptions.CHECK_TABLES``
for a check: the plan then has the scan make it, the scan fetches it, the window merges it over days (every value
column summed, unless ``merge`` names it a max or a min) and the store keeps it. tests/test_statistics_declarations.py
adds such a table and nothing else.

A statement is a function of the pass's :class:`Shape` (K, the wide positions Kw, the configuration, ...). The
special cases are fields: statements materialized first (``before``: check d's pair cells), a statement whose rows a
driver-side split turns into several tables (``split``, the others ``made_by`` it), a probe whose rows choose the
statement (``probe``: ad_position), a condition (``when``: the calibration cells of a fixed scope key), the ADC-based
tables (``adc``), column patterns in ``merge`` (slate_moments' max_Y_k), frames aligned before merging (``align``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from .sql import decision_tables as DT
from .sql import decisions as D
from .sql import interaction_tables as I
from .sql import log_tables as T
from .sql import pairs_tables as PT
from .sql import logs as L
from .sql import ranking_tables as RT
from .sql import slate_tables as ST
from ..estimators import ranking_sums as RS
from .moment_columns import align_moments
from .tables import TABLES, partial_against_window, split_factored, split_policy_groups

BY_VALUE_EVENTS = 20  # ad_position sums per scope-key value first when the values average >= 20 events each


@dataclass(frozen=True)
class Shape:
    """What a pass's statements depend on besides the relations they read (scan.py fills it in as it learns it)."""

    config: object                # scan.StatsConfig
    K: int = 0                    # the pass's slate size: the largest position of a clean row
    Kw: int = 0                   # positions held as wide columns of scv_flat (scan.wide_positions)
    held: str = "0"               # the positions a full slate of the row's own day holds (scan.held_positions_sql)
    stratum: str = "context_id"   # the calibration scope key's column (log_tables.stratum_sql)
    day_k: dict = field(default_factory=dict)   # {'YYYY-MM-DD': the day's K} (scan.day_positions)
    probe: object = None          # the rows of the table's probe statement, when it declares one


@dataclass(frozen=True)
class Table:
    """One per-day statistics table (see module doc)."""

    name: str
    side: str                         # "log": over the clean events (scv_flat, scv_events); "decision": scv_joined
    keys: tuple = ()                  # without dt
    merge: dict = field(default_factory=dict)   # {column, or a regular expression of columns: "max" | "min" |
    #                                   a function of the column's values}; every other value column is summed
    #                                   (arrays element by element), nulls counting 0
    sql: Callable | None = None       # Shape -> its statement, or {label: statement} when ``split`` reads several
    per_day: bool = False             # dt stays a key when merging (the statistic is judged within a day)
    big: bool = False                 # as many rows as events: kept by the engine, stored by it, never in pandas
    columns: tuple = ()               # a big table's stored columns
    always: bool = False              # made on every pass of its side, whatever the estimators and checks read
    when: Callable | None = None      # StatsConfig -> whether the table can be made at all
    adc: str | None = None            # "identified": ADC-based, made only where the ads identify the ADCs under a
    #                                   plan's adc_tables="identifiable"; "given": read only with ADCs given
    slot_rewards: bool = False        # reads the slot rewards w_k (scv_joined carries them only then)
    event_ids: bool = False           # reads the clean rows' event ids (scv_joined carries them only then)
    before: tuple = ()                # ((relation, Shape -> statement), ...) materialized first (once for the side:
    #                                   check d and check f share scv_pair_cells), dropped after the side
    probe: tuple | None = None        # (label, Shape -> statement): fetched first, its rows in Shape.probe
    split: Callable | None = None     # ({label: frame}, Shape) -> {table: frame}
    made_by: str | None = None        # the table whose statement (and split) makes this one
    align: Callable | None = None     # (frames, by_dt) -> the frames made comparable before they are merged
    step: str = "loop"                # "loop": made in the scan's loop; "pass": at a fixed step of the pass (the
    #                                   counts that give K, the policy limit and the quarantine; the event ids)
    needs: tuple = ()                 # tables of the same pass this one's statement reads (made first: log side)
    frames: tuple = ()                # ((relation, (tables, Shape) -> pandas frame), ...) registered first: small
    #                                   relations computed from the pass's tables made so far (Cascade-DR's model)

    def __post_init__(self):
        # the keys of ``merge`` that are no identifiers: patterns a column's whole name matches
        object.__setattr__(self, "_patterns", tuple((re.compile(k), h) for k, h in self.merge.items()
                                                    if not k.isidentifier()))

    def rule(self, column: str):
        """The merge rule of a value column: "max", "min", a function, or None (summed)."""
        how = self.merge.get(column)
        if how is None and self._patterns:
            how = next((h for p, h in self._patterns if p.fullmatch(column)), None)
        return how

    def statements(self, shape: Shape) -> dict:
        """{label: statement} of the table's own statement(s) under ``shape`` (an entry None under it left out)."""
        s = self.sql(shape)
        return {k: v for k, v in s.items() if v is not None} if isinstance(s, dict) else {self.name: s}


def declare(*tables: Table) -> None:
    """Add declarations to tables.TABLES (each name once)."""
    for t in tables:
        if t.name in TABLES:
            raise ValueError(f"statistics table {t.name!r} is declared twice")
        TABLES[t.name] = t


def loop_tables(side: str) -> list:
    """The tables the scan's loop makes on ``side`` (each statement once: not those another one's split makes)."""
    return [t for t in TABLES.values() if t.side == side and t.step == "loop" and t.made_by is None]


def maker(name: str) -> Table:
    """The declaration whose statement makes table ``name``."""
    t = TABLES[name]
    return TABLES[t.made_by] if t.made_by else t


def _scope(s: Shape) -> str:
    return "context_id" if s.stratum == "context_id" else "stratum"


def _few_values(probe: pd.DataFrame) -> bool:
    """ad_position's probe: the scope key's values average BY_VALUE_EVENTS events or more (sum per value first)."""
    n, values = (float(pd.to_numeric(probe[c], errors="coerce").fillna(0).iloc[0]) for c in ("n", "strata"))
    return values * BY_VALUE_EVENTS <= n


# check d's slot-pair cells, with check f's reward sums as columns: materialized once for both checks (scan._make)
_PAIR_CELLS = ("scv_pair_cells", lambda s: T.pair_cells(s.Kw))

MIN, MAX = "min", "max"
declare(
    # ---- the rows of each side, counted at the pass's fixed steps ----------------------------------------------
    Table("log_counts", "log", merge={"min_propensity": MIN, "max_propensity": MAX, "min_reward": MIN,
                                      "max_reward": MAX, "min_slots": MIN, "max_slots": MAX, "k_max": MAX,
                                      "logging_policies": MAX},
          sql=lambda s: L.log_counts(s.config.rules.max_slots), per_day=True, always=True, step="pass"),
    Table("decision_counts", "decision", merge={"min_probability": MIN, "max_probability": MAX,
                                                "max_sum_deviation": MAX, "policies": MAX},
          sql=lambda s: D.decision_counts(s.Kw, s.config.rules), per_day=True, always=True, step="pass"),
    # ---- the logs' side (the clean events: scv_flat, scv_events) ---------------------------------------------
    Table("log_summary", "log", ("logging_policy",), {"k_max": MAX, "r_max": MAX, "r_min": MIN},
          sql=lambda s: T.log_summary(s.K, s.Kw), always=True),
    Table("ad_position", "log", ("logging_policy", "fold", "ad_id", "position"),
          {"min_p": MIN, "max_p": MAX, "stratum_min": MIN, "stratum_max": MAX}, always=True,
          probe=("stratum_count", lambda s: T.stratum_count(_scope(s))),
          sql=lambda s: T.ad_position(s.Kw, s.config.bootstrap, s.config.seed, _scope(s),
                                      by_value=_few_values(s.probe))),
    # per day: check a tests independence within each day (a logger may change from day to day, seed 001
    # Theorem 3), so that a context feature that changes with the day does not read as context dependence
    Table("context_cells", "log", ("logging_policy", "position", "feature", "value", "ad_id"), per_day=True,
          sql=lambda s: T.context_cells()),
    # K = 1 too: an empty table, so that the day is reusable
    Table("pair_strata", "log", ("logging_policy", "stratum", "j", "k"), per_day=True,
          before=(_PAIR_CELLS,), sql=lambda s: T.pair_strata()),
    # check f: the reward at k against the ad at j < k, summed over (context, fold) strata within each day (K = 1:
    # an empty table); per day so that a window's sums are the days' own, whatever the batches
    Table("interaction_cells", "log", ("logging_policy", "fold", "j", "ad_id", "k"), per_day=True,
          before=(_PAIR_CELLS,), sql=lambda s: I.interaction_cells(s.Kw)),
    # Cascade-DR's reward model: the reward-to-go per (fold, position, ad) of each day (estimators/ranking_sums)
    Table("ranking_rtg", "log", ("fold", "position", "ad_id"), per_day=True, sql=lambda s: RT.reward_to_go(s.Kw)),
    Table("calibration_cells", "log", ("logging_policy", "stratum", "position", "ad_id"),
          {"min_p": MIN, "max_p": MAX}, always=True, when=lambda config: bool(config.fixed_calibration_key),
          sql=lambda s: T.calibration_cells(T.stratum_sql(s.config.fixed_calibration_key))),
    # ---- the decisions' side (scv_joined) --------------------------------------------------------------------
    Table("decision_policies", "decision", ("policy_id",), sql=lambda s: D.decision_policies(s.config.rules),
          always=True, step="pass"),
    Table("policy_events", "decision", ("policy_id",), {"k_held": MAX}, always=True,
          sql=lambda s: {"policy_extras": DT.policy_extras(s.Kw) if s.K > s.Kw else None,
                         "policy_groups": DT.policy_groups(s.held, s.Kw)},
          split=lambda f, s: split_policy_groups(f["policy_groups"], f.get("policy_extras"), s.K, s.day_k),
          align=lambda frames, by_dt: frames if by_dt else partial_against_window(frames)),
    Table("base_targets", "decision", ("policy_id", "base_policy"), made_by="policy_events"),
    Table("slate_moments", "decision", ("policy_id", "logging_policy", "fold"), {"max_W": MAX, r"max_Y_\d+": MAX},
          made_by="policy_events", align=align_moments),
    Table("factored", "decision", ("policy_id", "ad_id", "pos_i", "pos_j"), adc="identified", slot_rewards=True,
          sql=lambda s: DT.factored(s.Kw), split=lambda f, s: split_factored(f["factored"])),
    Table("factored_sq", "decision", ("policy_id", "ad_id", "pos_i", "pos_j", "pos_j2"), made_by="factored"),
    # evaluate --baseline naming a target: every other target's products with it on the events both decide
    Table("pair_moments", "decision", ("policy_id", "baseline_id", "fold"), always=True, event_ids=True,
          when=lambda config: config.baseline not in (None, "logging"),
          sql=lambda s: PT.pair_moments(s.Kw, s.config.baseline)),
    # the ranking family (estimators/ranking.py): per-position and cross sums of the item-position and prefix weights
    Table("ranking_sums", "decision", ("policy_id", "logging_policy", "fold", "k", "l"), slot_rewards=True,
          sql=lambda s: RT.ranking_sums(s.Kw), split=lambda f, s: {"ranking_sums": RS.to_long(f["ranking_sums"])}),
    # Cascade-DR's per-event terms with the day's cross-fitted model q (scv_q, from this pass's ranking_rtg)
    Table("ranking_dr", "decision", ("policy_id", "logging_policy", "fold", "k"), slot_rewards=True,
          needs=("ranking_rtg",), frames=(("scv_q", lambda tables, s: RS.reward_model(tables["ranking_rtg"])),),
          sql=lambda s: RT.cascade_dr(s.Kw), split=lambda f, s: {"ranking_dr": RS.to_long(f["ranking_dr"], dr=True)}),
    Table("target_placements", "decision", ("policy_id", "logging_policy", "ad_id", "pos_j"), always=True,
          sql=lambda s: DT.target_placements(s.Kw)),
    Table("policy_ads", "decision", ("policy_id", "ad_id"), adc="identified", slot_rewards=True,
          sql=lambda s: DT.policy_ads(s.Kw)),
    # the re-ordering estimate's event-level variance: with ADCs estimated from the same logs it is per impression
    # (estimators/adc_family), and this table is read by nothing
    Table("reorder_pairs", "decision", ("policy_id", "pos_i", "pos_j", "pos_k", "pos_j2"), adc="given",
          slot_rewards=True, sql=lambda s: DT.reorder_pairs(s.Kw)),
    Table("slate_targets", "decision", ("policy_id", "held", "slate_key"), big=True,
          columns=("dt", "policy_id", "held", "slate_key", "n_target", "n_match", "s_r", "s_r2"),
          sql=lambda s: ST.slate_targets(s.Kw)),
    Table("slate_covered", "decision", ("policy_id", "held", "slate_key"), big=True,
          columns=("dt", "policy_id", "held", "slate_key", "t"), sql=lambda s: ST.slate_covered(s.Kw)),
    # the pass's event ids, which the next days' duplicate check reads (statistics/copies.py)
    Table("event_ids", "log", ("id_hash",), big=True, columns=("dt", "id_hash"), sql=lambda s: L.event_ids(),
          always=True, step="pass"),
)
ADC_TABLES = tuple(n for n in TABLES if maker(n).adc == "identified")   # factored, factored_sq, policy_ads
