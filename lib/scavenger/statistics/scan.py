"""One pass over a batch of days: read the logs once, flag and quarantine bad rows, join the decisions once, and
aggregate every per-day table the estimators and the checks need (the statements of ``statistics/sql``).

    scan = scan_days(engine, logs, decisions, days, plan, quarantine_dir=..., run_id=...)
    scan.tables      {table: pandas frame with dt}   small tables, fetched
    scan.big         {table: engine relation}         slate tables and event ids, as many rows as events
    scan.counts      {"logs": per-dt counts, "decisions": per-dt counts}

Nothing row-level reaches the driver: every fetch is an aggregation. The engine keeps the materialized rows
(``scv_ev``, ``scv_joined``) until the batch is done and the big tables until the job ends.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from ..checks.rules import RuleConfig
from ..contract import DECISIONS, LOGS, load_contract
from ..errors import UsageError
from .sql import decision_tables as DT
from .sql import decisions as D
from .sql import logs as L
from .sql import log_tables as T
from .tables import split_factored, split_policy_groups

STATS_VERSION = 12  # 3: one pass in SQL (partial slates, folds, check tables); 4: events per ad (ev); 5: long-form
#                     factored sums and extra positions (wide columns for the positions most rows hold);
#                     6: CONTEXT_DUPLICATE_KEY in log_counts; m_r, impressions with a known slot reward
#                     (ad_position, policy_ads; m_boot counts them); 7: n_short in policy_events; nanosecond
#                     and text event times read alike on both engines (rows clean on one engine only before);
#                     8: event_ids' id_hash a BIGINT (the hex text before); 9: stochastic re-orderings of
#                     the logged slate in n_reorder and reorder_pairs; 10: policy_events' n_partial against the
#                     row's own day's K, with k_held; 11: ID_TOO_LONG,
#                     CONTEXT_TOO_LONG in log_counts and decision_counts; 12: log_counts' max_slots over the
#                     clean rows (a quarantined row's slots widened the intervals' reward range)
WIDE_MIN = 4         # positions 1..min(K, 4) are always wide columns of the flat relation
WIDE_SHARE = 0.01    # beyond that, position k is a wide column while more than 1% of the clean rows reach it,
WIDE_ROWS = 100      # and at least 100 of them (a wide column costs the statements K^2 moment sums: one row of
WIDE_MAX = 64        # 64 slots among 80 made 4,096 and 13 s), and never beyond 64 (128 wide positions made a
#                      statement DuckDB dies on, SIGFPE): the rows reaching further hold the rest as a list
BY_VALUE_EVENTS = 20  # ad_position sums per scope-key value first when the values average >= 20 events each
LOG_TABLES = ("log_summary", "ad_position", "context_cells", "pair_strata", "calibration_cells")
DECISION_TABLES = ("policy_events", "base_targets", "slate_moments", "slate_targets", "slate_covered", "factored",
                   "factored_sq", "target_placements", "policy_ads", "reorder_pairs")
ADC_TABLES = ("factored", "factored_sq", "policy_ads")    # ScanPlan.adc_tables
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

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("policies", None)
        return d


@dataclass
class ScanPlan:
    """Which optional tables a scan computes (the rest always): from the estimators and checks in use."""

    slate_targets: bool = True   # the direct approach's big tables, slate_targets and slate_covered
    context_cells: bool = True
    pair_strata: bool = True
    reorder_pairs: bool = True   # the re-ordering estimates' event-level variance: read only with ADCs given
    # factored, factored_sq, policy_ads (what the factored and re-ordering estimates read beyond the rest):
    # "always"; "identifiable": only when the batch's ads can identify the ADCs (adcs_identifiable: ADCs estimated
    # from these logs, the window asks again after merging); "never": no ADC-based estimator asked for
    adc_tables: str = "always"

    def tables(self, decisions: bool, fixed_key: bool) -> set:
        out = {"log_summary", "ad_position", "log_counts"}
        out |= {n for n in ("context_cells", "pair_strata") if getattr(self, n)}
        if fixed_key:
            out.add("calibration_cells")
        if decisions:
            out |= set(DECISION_TABLES) | {"decision_counts", "decision_policies"}
            if not self.slate_targets:
                out -= {"slate_targets", "slate_covered"}
            if not self.reorder_pairs:
                out.discard("reorder_pairs")
            if self.adc_tables != "always":
                out -= set(ADC_TABLES)
        return out


def adcs_identifiable(ad_position: pd.DataFrame, K: int) -> bool:
    """Whether these ad_position rows can identify any ADC the factored and re-ordering estimates need: one
    position only (C = (1)), or some ad shown at two positions or more. Otherwise every C_i, i > 1, compares
    different ads (estimators/adc_family.adc_identification) and the ADC-based estimates are not identified, so their
    tables are not computed (ScanPlan.adc_tables = "identifiable")."""
    if K < 2:
        return True
    if not len(ad_position):
        return False
    shown = ad_position[pd.to_numeric(ad_position["m"], errors="coerce").fillna(0) > 0]
    return bool((shown.groupby("ad_id", observed=True)["position"].nunique() > 1).any())


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
    engine.prepare([L.events(cfg), L.duplicate_ids(), L.duplicates(), L.events_view(cfg, prior),
                    L.log_counts(cfg.max_slots)])
    engine.read("scv_logs", logs, load_contract(LOGS), days)
    engine.materialize("scv_ev", L.events(cfg))
    engine.materialize("scv_dup_ids", L.duplicate_ids())
    engine.materialize("scv_dups", L.duplicates())
    if prior:
        engine.view("scv_prior", " UNION ALL ".join(f"SELECT id_hash FROM {r}" for r in prior_relations))
        engine.materialize("scv_prior_hits", L.prior_hits())
    engine.view("scv_events", L.events_view(cfg, prior))
    log_counts = engine.fetch(L.log_counts(cfg.max_slots), "log_counts")
    k_max = pd.to_numeric(log_counts["k_max"], errors="coerce").max() if len(log_counts) else None
    K = int(0 if k_max is None or pd.isna(k_max) else k_max)   # no clean row: K = 0
    Kw = K if K <= WIDE_MIN else wide_positions(engine.fetch(L.row_positions(), "row_positions"), K)
    if quarantine_dir:
        _write_quarantine(engine, L.quarantined(run_id), f"{quarantine_dir}/logs", days, log_counts)
    wanted = plan.tables(decisions is not None or bool(derived), bool(config.fixed_calibration_key))
    stratum = T.stratum_sql(config.calibration_key)
    sizes = (K, Kw, held_positions_sql(log_counts, K))
    _prepare(engine, config, sizes, stratum, wanted, decisions is not None or bool(derived))
    engine.view("scv_flat_slots", L.flat(Kw))
    engine.materialize("scv_flat", L.flat_columns(Kw, stratum))
    tables = {"log_counts": log_counts}
    big = {}
    if K > 0:
        tables["log_summary"] = engine.fetch(T.log_summary(K, Kw), "log_summary")
        tables["ad_position"] = _ad_position(engine, Kw, config, stratum)
        if "context_cells" in wanted:
            tables["context_cells"] = engine.fetch(T.context_cells(), "context_cells")
        if "pair_strata" in wanted:     # K = 1 too: an empty table, so the day is reusable
            engine.materialize("scv_pair_cells", T.pair_cells(Kw))
            tables["pair_strata"] = engine.fetch(T.pair_strata(), "pair_strata")
            engine.drop(["scv_pair_cells"])
        if "calibration_cells" in wanted:
            tables["calibration_cells"] = engine.fetch(
                T.calibration_cells(T.stratum_sql(config.fixed_calibration_key)), "calibration_cells")
    big["event_ids"] = _keep(engine, f"scv_{batch}_event_ids", L.event_ids())
    policies = 0
    if K > 0 and plan.adc_tables == "identifiable" and adcs_identifiable(tables["ad_position"], K):
        wanted = wanted | set(ADC_TABLES)
    if decisions is not None or derived:
        policies = _decision_tables(engine, decisions, derived, days, config, sizes, wanted, quarantine_dir,
                                    run_id, batch, tables, big)
    engine.release()
    note(f"scanned {len(days)} day(s): K={K}, {int(log_counts['rows'].sum()) if len(log_counts) else 0} log rows")
    return ScanResult(tables=tables, big=big, counts={"logs": log_counts,
                                                      "decisions": tables.get("decision_counts")}, K=K,
                      policies=policies, Kw=Kw)


def _prepare(engine, config: StatsConfig, sizes: tuple, stratum: str, wanted: set, decisions: bool) -> None:
    """The statements the rest of the pass will likely run, in their order, for the engine to ready meanwhile
    (Engine.prepare: DuckDB translates them on a thread). Only a hint: a statement not named here, or named with
    other arguments, is translated when it runs."""
    K, Kw, held = sizes
    if K == 0:
        return
    out = [L.flat(Kw), L.flat_columns(Kw, stratum), T.log_summary(K, Kw)]
    out += [T.context_cells()] if "context_cells" in wanted else []
    out += [T.pair_cells(Kw), T.pair_strata()] if "pair_strata" in wanted else []
    out += [L.event_ids()]
    if decisions:
        out += [D.policy_count(), D.decision_policies(config.rules), D.qkeys(), D.duplicate_decision_hashes(),
                D.duplicate_decisions(False), D.joined(config.rules, K, Kw, _rewards(wanted)),
                D.decision_counts(Kw, config.rules), DT.policy_groups(held, Kw)]
        out += [DT.factored(Kw)] if "factored" in wanted else []
        out += [DT.target_placements(Kw)] + ([DT.policy_ads(Kw)] if "policy_ads" in wanted else [])
        out += [DT.slate_targets(Kw)] if "slate_targets" in wanted else []
        out += [DT.slate_covered(Kw)] if "slate_covered" in wanted else []
    engine.prepare(out)


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


def _rewards(wanted: set) -> bool:
    """Whether scv_joined carries the slot rewards: some table of decisions.REWARD_TABLES is made."""
    return bool(set(D.REWARD_TABLES) & set(wanted))


def _ad_position(engine, Kw: int, config: StatsConfig, stratum: str) -> pd.DataFrame:
    """ad_position, summed per value of the scope key first when its values average BY_VALUE_EVENTS events or more
    (tables.ad_position: the two shapes give the same table)."""
    strat = "context_id" if stratum == "context_id" else "stratum"
    probe = engine.fetch(T.stratum_count(strat), "stratum_count")
    n, values = (float(pd.to_numeric(probe[c], errors="coerce").fillna(0).iloc[0]) for c in ("n", "strata"))
    return engine.fetch(T.ad_position(Kw, config.bootstrap, config.seed, strat,
                                      by_value=values * BY_VALUE_EVENTS <= n), "ad_position")


def _decision_tables(engine, decisions, derived, days, config: StatsConfig, sizes: tuple, wanted: set,
                     quarantine_dir, run_id: str, batch: str, tables: dict, big: dict) -> int:
    """The decisions' side of the pass: read them once, join them once to the clean flat events, and add their
    tables to ``tables`` / ``big``. Returns the number of target policies."""
    K, Kw, held = sizes
    cfg = config.rules
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
    tables["decision_policies"] = engine.fetch(D.decision_policies(cfg), "decision_policies")
    engine.materialize("scv_qkeys", D.qkeys())
    if not derived:     # the flagged rows' last reader (derived decisions read them in the join): peak memory down
        engine.drop(LOG_ROWS)
    engine.materialize("scv_dup_dec_hashes", D.duplicate_decision_hashes())
    repeats = int(engine.fetch(D.repeated_hash_count(), "repeated_hashes")["n"].iloc[0])
    engine.materialize("scv_dup_dec", D.duplicate_decisions(repeats > 0))
    engine.materialize("scv_joined", D.joined(cfg, K, Kw, _rewards(wanted)))
    engine.drop(DONE_BEFORE_TABLES)     # every later statement reads scv_joined alone
    dec_counts = engine.fetch(D.decision_counts(Kw, cfg), "decision_counts")
    tables["decision_counts"] = dec_counts
    if quarantine_dir:
        _write_quarantine(engine, D.quarantined(run_id, cfg), f"{quarantine_dir}/decisions", days, dec_counts)
    if K > 0:
        extras = engine.fetch(DT.policy_extras(Kw), "policy_extras") if K > Kw else None
        groups = engine.fetch(DT.policy_groups(held, Kw), "policy_groups")
        tables.update(split_policy_groups(groups, extras, K, day_positions(tables["log_counts"], K)))
        if "factored" in wanted:
            tables.update(split_factored(engine.fetch(DT.factored(Kw), "factored")))
        tables["target_placements"] = engine.fetch(DT.target_placements(Kw), "target_placements")
        if "policy_ads" in wanted:
            tables["policy_ads"] = engine.fetch(DT.policy_ads(Kw), "policy_ads")
        if "reorder_pairs" in wanted:
            tables["reorder_pairs"] = engine.fetch(DT.reorder_pairs(Kw), "reorder_pairs")
        if "slate_targets" in wanted:
            big["slate_targets"] = _keep(engine, f"scv_{batch}_slate_targets", DT.slate_targets(Kw))
        if "slate_covered" in wanted:
            big["slate_covered"] = _keep(engine, f"scv_{batch}_slate_covered", DT.slate_covered(Kw))
    return policies


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
    """Quarantined rows of these days under ``uri``/dt=*/ (a re-run replaces exactly these days), or into the
    catalog table ``uri`` = ``catalog:<db>.<table>`` (Spark), partitions of these days replaced. ``counts``: the
    rows quarantined per dt (log_counts, decision_counts)."""
    from ..io.manifest import record_quarantine

    by_day = {d: int(q) for d, q in zip(counts["dt"], counts["quarantined"])} if len(counts) else {}
    n = sum(by_day.values())
    record_quarantine(uri, days, {d: by_day.get(d, 0) for d in days})
    if uri.startswith("catalog:"):
        from ..io import catalog

        table = uri[len("catalog:"):].replace("/", "_")
        for d in days:
            if engine.spark.catalog.tableExists(table):
                engine.spark.sql(f"ALTER TABLE {table} DROP IF EXISTS PARTITION (dt = DATE '{d.isoformat()}')")
        if n:
            catalog.write_sql(engine.spark, sql, table)
        return
    if n == 0:
        import uuid

        from ..engines.duck import commit_partitions
        from ..io import fs

        staging = fs.join(uri, "_staging", uuid.uuid4().hex)
        fs.makedirs(staging)
        commit_partitions(staging, fs.normalize(uri), days)
        fs.delete_own(staging)
        return
    engine.write(sql, uri, days)
