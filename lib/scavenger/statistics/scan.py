"""One pass over a batch of days: read the logs once, flag and quarantine bad rows, join the decisions once, and
aggregate every per-day table the plan names (statistics/declarations.py; their statements in ``statistics/sql``).

    scan = scan_days(engine, logs, decisions, days, plan, quarantine_dir=..., run_id=...)
    scan.tables      {table: pandas frame with dt}   small tables, fetched
    scan.big         {table: engine relation}         slate tables and event ids, as many rows as events
    scan.counts      {"logs": per-dt counts, "decisions": per-dt counts}

The pass's fixed steps (the read, the row rules, the counts that give K, the quarantine, the join) are written out
here; the tables are a loop over the declarations the plan names, the logs' side and then the decisions'. Nothing
row-level reaches the driver: every fetch is an aggregation. The engine keeps the materialized rows (``scv_ev``,
``scv_joined``) until the batch is done and the big tables until the job ends.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from ..checks.rules import RuleConfig
from ..contract import DECISIONS, LOGS, load_contract
from ..errors import UsageError
from .declarations import ADC_TABLES, TABLES, Shape, loop_tables  # noqa: F401 - ADC_TABLES, as imported before
from .plan import ScanPlan, adcs_identifiable
from .sql import decisions as D
from .sql import logs as L
from .sql import log_tables as T

STATS_VERSION = 13  # 3: one pass in SQL (partial slates, folds, check tables); 4: events per ad (ev); 5: long-form
#                     factored sums and extra positions (wide columns for the positions most rows hold);
#                     6: CONTEXT_DUPLICATE_KEY in log_counts; m_r, impressions with a known slot reward
#                     (ad_position, policy_ads; m_boot counts them); 7: n_short in policy_events; nanosecond
#                     and text event times read alike on both engines (rows clean on one engine only before);
#                     8: event_ids' id_hash a BIGINT (the hex text before); 9: stochastic re-orderings of
#                     the logged slate in n_reorder and reorder_pairs; 10: policy_events' n_partial against the
#                     row's own day's K, with k_held; 11: ID_TOO_LONG,
#                     CONTEXT_TOO_LONG in log_counts and decision_counts; 12: log_counts' max_slots over the
#                     clean rows (a quarantined row's slots widened the intervals' reward range); 13: slate
#                     moments' s_r2W (IPS minus what the logs earned, estimators/differences.py)
WIDE_MIN = 4         # positions 1..min(K, 4) are always wide columns of the flat relation
WIDE_SHARE = 0.01    # beyond that, position k is a wide column while more than 1% of the clean rows reach it,
WIDE_ROWS = 100      # and at least 100 of them (a wide column costs the statements K^2 moment sums: one row of
WIDE_MAX = 64        # 64 slots among 80 made 4,096 and 13 s), and never beyond 64 (128 wide positions made a
#                      statement DuckDB dies on, SIGFPE): the rows reaching further hold the rest as a list
# materialized rows dropped as soon as no later statement reads them (peak memory of a 4M-event DuckDB evaluate
# 3.4 -> 2.5 GB): the flagged logs once the quarantined keys are taken (unless derived decisions, which are SQL over
# scv_ev, statistics/reorder.py, are still to be joined), the rest once the decisions are joined
LOG_ROWS = ("scv_ev", "scv_dup_ids", "scv_dups", "scv_prior_hits")
DONE_BEFORE_TABLES = LOG_ROWS + ("scv_flat", "scv_qkeys", "scv_dup_dec_hashes", "scv_dup_dec")


@dataclass(frozen=True)
class StatsConfig:
    """What (besides the input files) determines a day's statistics; part of the stored day's fingerprint."""

    bootstrap: int = 0                   # Poisson bootstrap replicates for the ADC table (0: none)
    seed: int = 0                        # bootstrap seed (combined with event_id)
    calibration_key: str = "context_id"  # check e: the key whose partition of the ads ad_position records
    fixed_calibration_key: str | None = None  # check e with a scope the user fixed: calibration_cells by it
    rules: RuleConfig = field(default_factory=RuleConfig)
    max_policies: int = 1000             # more target policies than this: exit 2 naming --policies
    policies: tuple | None = None        # read only these target policies (--policies): the decisions' key says so,
                                         # so they are left out of the logs' fingerprint (to_dict)
    version: int = STATS_VERSION
    baseline: str | None = None          # evaluate --baseline naming a target: its pair moments (pairs_tables.py);
                                         # in the decisions' key (pipelines/evaluate.py), out of the logs'

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("policies", None)
        d.pop("baseline", None)
        return d


@dataclass
class ScanResult:
    tables: dict
    big: dict
    counts: dict
    K: int
    policies: int = 0
    Kw: int = 0          # positions held as wide columns in this pass (the rest as a list: wide_positions)


def scan_days(engine, logs, decisions, days, plan: ScanPlan, config: StatsConfig = StatsConfig(),
              quarantine_dir: str | None = None, run_id: str = "adhoc", batch: str = "b0",
              derived: list | None = None, prior_relations: list | None = None) -> ScanResult:
    """The one pass over ``days`` (see module doc). ``logs``/``decisions``: :class:`scavenger.io.sources.Source`;
    ``prior_relations``: the engine's event-id relations of the other days a row's id is checked against, for
    cross-day duplicates (statistics/copies.IdScope); ``derived``: SQL of derived decisions over scv_ev
    (re-orderings of the logged slates, statistics/reorder.py), joined like the others."""
    from ..progress import note

    cfg = config.rules
    prior = bool(prior_relations)
    has_dec = decisions is not None or bool(derived)
    shape = Shape(config)
    engine.prepare([L.events(cfg), L.duplicate_ids(), L.duplicates(), L.events_view(cfg, prior),
                    *_statements("log_counts", shape)])
    engine.read("scv_logs", logs, load_contract(LOGS), days)
    engine.materialize("scv_ev", L.events(cfg))
    engine.materialize("scv_dup_ids", L.duplicate_ids())
    engine.materialize("scv_dups", L.duplicates())
    if prior:
        engine.view("scv_prior", " UNION ALL ".join(f"SELECT id_hash FROM {r}" for r in prior_relations))
        engine.materialize("scv_prior_hits", L.prior_hits())
    engine.view("scv_events", L.events_view(cfg, prior))
    log_counts = _fetch(engine, "log_counts", shape)
    k_max = pd.to_numeric(log_counts["k_max"], errors="coerce").max() if len(log_counts) else None
    K = int(0 if k_max is None or pd.isna(k_max) else k_max)   # no clean row: K = 0
    Kw = K if K <= WIDE_MIN else wide_positions(engine.fetch(L.row_positions(), "row_positions"), K)
    if quarantine_dir:
        _write_quarantine(engine, L.quarantined(run_id), f"{quarantine_dir}/logs", days, log_counts)
    wanted = plan.tables(has_dec, config)
    shape = Shape(config, K, Kw, held_positions_sql(log_counts, K), T.stratum_sql(config.calibration_key),
                  day_positions(log_counts, K))
    if K > 0:
        engine.prepare(_hints(shape, wanted, has_dec))
    engine.view("scv_flat_slots", L.flat(Kw))
    engine.materialize("scv_flat", L.flat_columns(Kw, shape.stratum))
    tables, big = {"log_counts": log_counts}, {}
    if K > 0:
        _make(engine, "log", wanted, shape, batch, tables, big)
    big["event_ids"] = _keep(engine, f"scv_{batch}_event_ids", *_statements("event_ids", shape))
    policies = 0
    if K > 0 and plan.adc_tables == "identifiable" and adcs_identifiable(tables["ad_position"], K):
        wanted = plan.tables(has_dec, config, identified=True)
    if has_dec:
        policies, tables["decision_policies"], tables["decision_counts"] = _decision_side(
            engine, decisions, derived, days, shape, wanted, quarantine_dir, run_id)
        if K > 0:
            _make(engine, "decision", wanted, shape, batch, tables, big)
    engine.release()
    note(f"scanned {len(days)} day(s): K={K}, {int(log_counts['rows'].sum()) if len(log_counts) else 0} log rows")
    return ScanResult(tables=tables, big=big, counts={"logs": log_counts,
                                                      "decisions": tables.get("decision_counts")}, K=K,
                      policies=policies, Kw=Kw)


def _statements(name: str, shape: Shape) -> list:
    return list(TABLES[name].statements(shape).values())


def _fetch(engine, name: str, shape: Shape) -> pd.DataFrame:
    """A table of one statement (those of the pass's fixed steps)."""
    (label, sql), = TABLES[name].statements(shape).items()
    return engine.fetch(sql, label)


def _make(engine, side: str, wanted: set, shape: Shape, batch: str, tables: dict, big: dict) -> None:
    """Every table of ``side`` the plan names (``wanted``), in declaration order: its relations ``before``
    materialized, its probe fetched (the rows in shape.probe), its statements fetched (split into the tables it
    makes) or, for a big table, kept by the engine as ``scv_<batch>_<table>``."""
    made = []       # relations ``before`` materialized: once for every table of the side that names them
    for t in loop_tables(side):
        if t.name not in wanted:
            continue
        for relation, sql in t.before:
            if relation not in made:
                engine.materialize(relation, sql(shape))
                made.append(relation)
        for relation, frame in t.frames:
            engine.register_frame(relation, frame(tables, shape))
        s = shape if t.probe is None else replace(shape, probe=engine.fetch(t.probe[1](shape), t.probe[0]))
        statements = t.statements(s)
        if t.big:
            big[t.name] = _keep(engine, f"scv_{batch}_{t.name}", *statements.values())
        elif t.split is not None:
            tables.update(t.split({label: engine.fetch(sql, label) for label, sql in statements.items()}, s))
        else:
            tables[t.name] = engine.fetch(statements[t.name], t.name)
    if made:
        engine.drop(made)


def _hints(shape: Shape, wanted: set, decisions: bool) -> list:
    """The statements the rest of the pass will likely run, in their order, for the engine to ready meanwhile
    (Engine.prepare: DuckDB translates them on a thread): the fixed steps' and those of the tables the plan names
    (not a probed table's, whose statement waits on its probe's rows). Only a hint: a statement not named here, or
    named with other arguments, is translated when it runs."""
    K, Kw, cfg = shape.K, shape.Kw, shape.config.rules

    def tables(side):
        out = []
        for t in loop_tables(side):
            if t.name in wanted:
                out += [sql(shape) for _, sql in t.before]
                out += [t.probe[1](shape)] if t.probe else list(t.statements(shape).values())
        return list(dict.fromkeys(out))     # a relation several tables name ``before``: once

    out = [L.flat(Kw), L.flat_columns(Kw, shape.stratum), *tables("log"), *_statements("event_ids", shape)]
    if decisions:
        out += [D.policy_count(), *_statements("decision_policies", shape), D.qkeys(),
                D.duplicate_decision_hashes(), D.duplicate_decisions(False),
                D.joined(cfg, K, Kw, _rewards(wanted), _ids(wanted)),
                *_statements("decision_counts", shape), *tables("decision")]
    return out


def _rewards(wanted: set) -> bool:
    """Whether scv_joined carries the slot rewards: some table the pass makes reads them (Table.slot_rewards)."""
    return any(TABLES[n].slot_rewards for n in wanted)


def _ids(wanted: set) -> bool:
    """Whether scv_joined's clean rows carry their event ids: some table the pass makes joins two policies' rows of
    an event (Table.event_ids: pair_moments)."""
    return any(TABLES[n].event_ids for n in wanted)


def _decision_side(engine, decisions, derived, days, shape: Shape, wanted: set, quarantine_dir, run_id: str) -> tuple:
    """The decisions' fixed steps: read them once, join them once to the clean flat events (scv_joined, which the
    decision-side tables read), count and quarantine their rows. Returns (target policies, decision_policies,
    decision_counts)."""
    config, cfg, K, Kw = shape.config, shape.config.rules, shape.K, shape.Kw
    parts = []
    if decisions is not None:
        engine.read("scv_dec_in", decisions, load_contract(DECISIONS), days)
        if config.policies:          # --policies: the others are never joined (nor counted against the limit)
            engine.register_frame("scv_selected", pd.DataFrame({"policy_id": list(config.policies)}))
            parts.append("SELECT * FROM scv_dec_in WHERE policy_id IN (SELECT policy_id FROM scv_selected)")
        else:
            parts.append("SELECT * FROM scv_dec_in")
    parts += [f"SELECT * FROM ({sql}) d{i}" for i, sql in enumerate(derived or [])]
    engine.view("scv_dec", " UNION ALL ".join(parts))
    policies = int(engine.fetch(D.policy_count(), "policy_count")["policies"].iloc[0] or 0)
    if policies > config.max_policies:
        raise UsageError(f"the decisions hold {policies} target policies, more than the limit of "
                         f"{config.max_policies}: choose some with --policies (or raise --max-policies)")
    decision_policies = _fetch(engine, "decision_policies", shape)
    engine.materialize("scv_qkeys", D.qkeys())
    if not derived:     # the flagged rows' last reader (derived decisions read them in the join): peak memory down
        engine.drop(LOG_ROWS)
    engine.materialize("scv_dup_dec_hashes", D.duplicate_decision_hashes())
    repeats = int(engine.fetch(D.repeated_hash_count(), "repeated_hashes")["n"].iloc[0])
    engine.materialize("scv_dup_dec", D.duplicate_decisions(repeats > 0))
    engine.materialize("scv_joined", D.joined(cfg, K, Kw, _rewards(wanted), _ids(wanted)))
    engine.drop(DONE_BEFORE_TABLES)     # every later statement reads scv_joined alone
    dec_counts = _fetch(engine, "decision_counts", shape)
    if quarantine_dir:
        _write_quarantine(engine, D.quarantined(run_id, cfg), f"{quarantine_dir}/decisions", days, dec_counts)
    return policies, decision_policies, dec_counts


def day_positions(log_counts: pd.DataFrame, K: int) -> dict:
    """{'YYYY-MM-DD': the day's K} (its largest clean position, log_counts.k_max; ``K`` where the day has none)."""
    if not len(log_counts) or "k_max" not in log_counts.columns:
        return {}
    k = pd.to_numeric(log_counts["k_max"], errors="coerce").fillna(K).astype(int)
    return {pd.Timestamp(d).date().isoformat(): int(v) for d, v in zip(log_counts["dt"], k) if pd.notna(d)}


def held_positions_sql(log_counts: pd.DataFrame, K: int) -> str:
    """The positions a full slate of the row's own day holds (policy_groups' n_partial counts the rows holding
    fewer): ``K`` when the pass's days share it, else a CASE over dt, so that a day's count does not depend on the
    days it was scanned with (tables.merge counts a day of a smaller K as partial in a window of a larger)."""
    ks = day_positions(log_counts, K)
    if len(set(ks.values()) | {K}) == 1:
        return str(K)
    whens = " ".join(f"WHEN DATE'{d}' THEN {k}" for d, k in sorted(ks.items()))
    return f"CASE dt {whens} ELSE {K} END"


def wide_positions(profile: pd.DataFrame, K: int) -> int:
    """Kw: how many positions are wide columns of the flat relation. At least min(K, WIDE_MIN); beyond that, up to
    WIDE_MAX, position k while more than WIDE_SHARE of the clean rows, and at least WIDE_ROWS, reach it
    (``profile``: clean rows per largest position held). The other rows' slots beyond Kw travel as a list, so one
    very long row costs its own length, not K columns on every row."""
    if not len(profile):
        return min(K, WIDE_MIN)
    k_row = pd.to_numeric(profile["k_row"], errors="coerce").fillna(0).to_numpy()
    n = pd.to_numeric(profile["n"], errors="coerce").fillna(0).to_numpy()
    total = n.sum()
    Kw = min(K, WIDE_MIN)
    for k in range(Kw + 1, min(K, WIDE_MAX) + 1):
        reach = n[k_row >= k].sum()
        if reach > WIDE_SHARE * total and reach >= WIDE_ROWS:
            Kw = k
    return Kw


def _keep(engine, name: str, sql: str) -> str:
    engine.materialize(name, sql, keep=True)
    return name


def _write_quarantine(engine, sql: str, uri: str, days, counts: pd.DataFrame) -> None:
    """Quarantined rows of these days under ``uri`` (dt=*/ directories, or a catalog table on Spark), the days'
    partitions replaced (Engine.write_quarantine); ``counts``: the rows quarantined per dt (log_counts,
    decision_counts), recorded for the run's manifest."""
    from ..io.manifest import record_quarantine

    by_day = {d: int(q) for d, q in zip(counts["dt"], counts["quarantined"])} if len(counts) else {}
    record_quarantine(uri, days, {d: by_day.get(d, 0) for d in days})
    engine.write_quarantine(sql, uri, days, sum(by_day.values()))
