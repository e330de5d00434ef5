"""A window's statistics: stored days loaded, missing days scanned (one pass each batch) and stored, all merged.

    w = window_statistics(engine, logs, decisions, dates, plan, config, store=Store(uri))
    w.table("slate_moments")     merged over the window (pandas)
    w.day(d).table(...)          one day's tables (for --by-day estimates), from the same per-day statistics
    w.big["slate_targets"]       an engine relation over every day of the window (stored files + this run's)

A day is scanned when the store has no usable copy (store.Store.usable). Scans run in batches of
``batch_days`` consecutive missing days (0: one batch; None: as many days as the engine holds in memory,
statistics/batches.auto_batch_days), each batch is stored before the next starts, and a batch
never spans a stored day, so the event ids of every earlier stored day are at hand for the cross-day duplicate
check (``DUPLICATE_EVENT_ID`` against the days before the batch, or every other day with quarantine_all; the
stored days a day read now makes stale are scanned again: statistics/copies.py).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import pandas as pd

from ..progress import phase
from .batches import auto_batch_days, batches, id_scope
from .copies import stale_days
from .scan import StatsConfig, adcs_identifiable, scan_days
from .store import STORE_LAYOUT, Store, day_signature, fingerprint
from .lazy_tables import LazyTables, _Pending
from .moment_columns import fit_moments
from .tables import TABLES, big_columns, merge, merge_all, merge_tables, small_tables, sorted_day


@dataclass
class WindowStats:
    """Merged statistics of a window (see module doc)."""

    tables: dict
    per_day: dict
    dates: list
    scanned: list = field(default_factory=list)
    loaded: list = field(default_factory=list)
    big: dict = field(default_factory=dict)
    K: int = 0
    engine: object = None
    Kw: int = 0                  # wide positions of this run's scans (0: every day from the store)
    batches: int = 0             # passes this run made (batches of missing days)
    only_day: object = None
    absent: tuple = ()           # days of the window (--from..--to) the logs hold no row of: in its label, not in dates
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def memo(self, key, fn):
        """A value derived from this window's tables (a group-by several estimators read), computed once: the
        by-day windows and running/'s prefixes each run every estimator, which read the same derived frames."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def table(self, name: str) -> pd.DataFrame:
        got = self.tables.get(name)
        if got is not None:
            return got
        t = TABLES[name]          # no such table: an empty one of its keys (built only then: ~1 ms a frame)
        return pd.DataFrame(columns=(["dt"] if t.per_day else []) + list(t.keys))

    @property
    def window(self) -> str:
        """The window's label: its first..last day, those without logs included (the window the run was asked for;
        counts.days_without_logs names the days it lacks)."""
        days = [*self.dates, *self.absent]
        if not days:
            return ""
        return f"{min(days).isoformat()}..{max(days).isoformat()}"

    def day(self, d) -> "WindowStats":
        """The statistics of day ``d`` alone (the same stored per-day tables; big relations filtered by dt), each
        table merged when first read (:class:`LazyTables`)."""
        raw = self.per_day.get(d, {})
        # the day's own K (the largest position of its clean rows), as a window of that day alone reads it: its ADC
        # vector, the direct approach's name and the slate moments are those of the day, whatever K the window has
        # or the batch it was scanned in had (Y_k = 1 at the positions beyond, which its rows do not hold)
        K = _day_K({"log_counts": raw.get("log_counts")}, self.K) or self.K
        tables = self._lazy(lambda name: [raw.get(name)], [d], K)
        return WindowStats(tables=tables, per_day={d: raw}, dates=[d],
                           big=self.big, K=K, engine=self.engine, only_day=d, Kw=self.Kw)

    def prefix(self, d, before: "WindowStats | None" = None) -> "WindowStats":
        """The statistics of the window's first day through ``d`` (a window of those days alone reads the same
        stored per-day tables): ``before``, the prefix through the day before, merged with day ``d`` (one day added
        per prefix, not every day again); big relations filtered to those days; each table merged when first read
        (:class:`LazyTables`: a table no estimator reads is never merged)."""
        days = [x for x in self.dates if x <= d]
        if before is not None and before.dates == days[:-1] and days and days[-1] == d:
            parts = lambda name: [before.tables.get(name), self.per_day.get(d, {}).get(name)]    # noqa: E731
        else:
            parts = lambda name: [self.per_day.get(x, {}).get(name) for x in days]              # noqa: E731
        K = max([_day_K(self.per_day.get(x, {}), self.K) for x in days] or [self.K])
        return WindowStats(tables=self._lazy(parts, days, K), per_day={x: self.per_day.get(x, {}) for x in days},
                           dates=days, big=self.big, K=K, engine=self.engine, Kw=self.Kw)

    def _lazy(self, parts, days: list, K: int) -> "LazyTables":
        """The tables of a window of ``days`` as merge_all gives them (``parts(name)``: the frames to merge, in
        order), slate moments fitted to K, a table of this window that those days lack as its empty frame."""
        small = set(small_tables())

        def make(name):
            frames = [f for f in parts(name) if f is not None and len(f)] if name in small else []
            merged = merge(name, frames) if frames else []
            if not len(merged):
                return self.tables[name].iloc[0:0]
            return fit_moments(merged, K) if name == "slate_moments" else merged
        held = {n for n in small if any(len(f) for x in days
                                        if (f := self.per_day.get(x, {}).get(n)) is not None)}
        return LazyTables({name: _Pending(make, name) for name in set(self.tables) | held})

    def big_where(self) -> str:
        """SQL filter of the big relations to this window's days (all of them, or the one day)."""
        days = [self.only_day] if self.only_day is not None else self.dates
        return "dt IN (" + ", ".join(f"DATE '{d.isoformat()}'" for d in days) + ")" if days else "1 = 0"


def window_statistics(engine, logs, decisions, dates: list, plan, config: StatsConfig = StatsConfig(),
                      store: Store | None = None, quarantine_dir: str | None = None, run_id: str = "adhoc",
                      decisions_key=None, batch_days: int | None = None, derived: list | None = None,
                      first_look: tuple = ()) -> WindowStats:
    """See the module docstring. ``decisions_key``: what else shapes the decision tables (policy filter, derived
    policies), part of the decisions fingerprint; ``first_look``: days an earlier look of this run scanned (a
    second look reads them from the store, but this run read their rows: they count as scanned)."""
    has_dec = decisions is not None or bool(derived)
    wanted = plan.tables(has_dec, config)
    cfg_fp = config.to_dict()
    logs_fp = {d: fingerprint({"logs": day_signature(logs, d), "config": cfg_fp, "layout": STORE_LAYOUT})
               for d in dates}
    dec_fp = {d: fingerprint({"decisions": day_signature(decisions, d), "key": decisions_key, "logs": logs_fp[d]})
              for d in dates} if has_dec else {d: None for d in dates}
    per_day, loaded, missing, manifests = {}, [], [], {}
    for d in dates:
        m = store.usable(d, logs_fp[d], dec_fp[d], wanted) if store else None
        if m is not None:
            manifests[d] = m
            loaded.append(d)
        else:
            missing.append(d)
    scope, old = id_scope(engine, logs, decisions, config, store, missing, dates, batch_days, first_look)
    for d in scope.again:
        manifests.pop(d)
        loaded.remove(d)
    missing = sorted({*missing, *scope.again})
    with ThreadPoolExecutor(max_workers=1) as background:
        # the stored days are read and merged while the engine scans the missing ones (the scan mostly waits on
        # the engine, the GIL released): a window after one new day then costs little more than its one day
        stored = background.submit(_load_merged, store, {d: manifests[d] for d in loaded}) if loaded else None
        K, Kw, runs, big_parts = _scan_missing(engine, logs, decisions, plan, config, store, quarantine_dir, run_id,
                                               derived, missing, manifests, per_day, batch_days,
                                               (logs_fp, dec_fp), scope)
        stored_days, stored_merged = stored.result() if stored is not None else ({}, {})
    if store and missing and not scope.both_ways and \
            (later := stale_days(engine, store, big_parts["event_ids"], old, {*missing, *first_look}, False)):
        # a day scanned now (a backfill, a re-delivery) repeats, or no longer holds, event ids of days stored after
        # it: those later days were checked against the earlier days they saw, so they are scanned again
        from ..progress import note

        note(f"{len(later)} stored day(s) after a day read now share event ids with it: scanned again "
             f"({', '.join(d.isoformat() for d in later[:5])}{' ...' if len(later) > 5 else ''})")
        for d in later:
            store.invalidate(d)
        return window_statistics(engine, logs, decisions, dates, plan, config, store, quarantine_dir, run_id,
                                 decisions_key, batch_days, derived, (*first_look, *missing))
    per_day.update(stored_days)
    if store and loaded:
        for name in big_columns():
            files = store.big_files(name, loaded)
            if files:
                rel = f"scv_stored_{name}"
                engine.read_parquet(rel, files, root=store.big_root(name))
                big_parts[name].insert(0, rel)
    big = {}
    for name, parts in big_parts.items():
        if parts:
            cols = ", ".join(big_columns()[name])
            big[name] = f"scv_w_{name}"
            engine.view(big[name], " UNION ALL ".join(f"SELECT {cols} FROM {p}" for p in parts))
    # the window = the stored days (merged above) + the scanned ones: every value is a sum, min or max over days
    merged = merge_all({_STORED: stored_merged, **{d: per_day[d] for d in missing}}, [_STORED, *missing]) \
        if loaded else merge_all(per_day, dates)
    if plan.adc_tables == "identifiable" and _adc_tables_left_out(per_day, plan) and \
            adcs_identifiable(merged.get("ad_position", pd.DataFrame(columns=["ad_id", "position", "m"])), K):
        # some days' ads alone could not identify the ADCs, so their ADC-based tables were not made, but the
        # window's can: every day again with them (stored days that hold them are reused)
        from ..progress import note

        note("the window's ads identify the ADCs where some days' alone did not: their ADC-based tables are made")
        return window_statistics(engine, logs, decisions, dates, replace(plan, adc_tables="always"), config, store,
                                 quarantine_dir, run_id, decisions_key, batch_days, derived, (*first_look, *missing))
    return WindowStats(tables=merged, per_day=per_day, dates=list(dates), scanned=sorted({*missing, *first_look}),
                       loaded=[d for d in loaded if d not in set(first_look)], big=big, K=K, engine=engine, Kw=Kw,
                       batches=len(runs))


_STORED = "stored days"


def _adc_tables_left_out(per_day: dict, plan) -> bool:
    """Some day has decision tables but not the ADC-based ones the plan makes where the ADCs are identified
    (ScanPlan.adc_tables = "identifiable")."""
    adc = plan.adc_names()
    return any("policy_events" in t and not adc <= set(t) for t in per_day.values())


def _load_merged(store: Store, manifests: dict) -> tuple:
    """({day: {table: frame}}, {table: merged frame}) of the stored days ``manifests`` ({day: manifest}): each table
    merged from its days read at once, not from one frame per day."""
    per_day, frames = store.load_tables(manifests)
    return per_day, merge_tables(frames, stored=True)


def _scan_missing(engine, logs, decisions, plan, config, store, quarantine_dir, run_id, derived, missing, manifests,
                  per_day, batch_days, fps, scope) -> tuple:
    """One pass per batch of the missing days: their tables into ``per_day`` and the store, their big relations
    returned as parts. Returns (K, Kw, batches, {big table: [relations]})."""
    logs_fp, dec_fp = fps
    stored = set(scope.id_days)
    big_parts: dict = {name: [] for name in big_columns()}
    K = max([int(m.get("K", 0)) for m in manifests.values()] or [0])
    Kw = 0
    if batch_days is None:
        batch_days = auto_batch_days(engine, logs, decisions, missing)
    runs = batches(missing, stored - set(missing), batch_days)
    for n, batch in enumerate(runs):
        label = f"one pass over {len(batch)} day(s) {min(batch)}..{max(batch)}"
        # the event ids of the other days (copies.IdScope); without a store, this run's earlier passes' (kept by
        # the engine) serve as the earlier days'
        earlier = scope.relations(engine, store, batch, big_parts["event_ids"])
        with phase(None, "statistics", label):
            res = scan_days(engine, logs, decisions, batch, plan, config, quarantine_dir, run_id, f"b{n}", derived,
                            earlier)
        K = max(K, res.K)
        Kw = max(Kw, res.Kw)
        days = _split(res.tables, batch)
        for d in batch:
            per_day[d] = days.get(d, {})
        for name, rel in res.big.items():
            big_parts[name].append(rel)
        if store:
            _store_batch(engine, store, batch, per_day, res, logs_fp, dec_fp, run_id, _unpinned(logs, decisions))
            # the next passes check their ids against this one's too (as against every day stored before the run):
            # a window scanned again (the ADC-based tables' second look) sees the same earlier days as one run
            scope.stored(batch)
    return K, Kw, runs, big_parts


def _split(tables: dict, batch: list) -> dict:
    """{day: {table: the day's rows}} of a pass's tables; a table that keeps dt as a key sorted (sorted_day)."""
    out = {d: {} for d in batch}
    for name, df in tables.items():
        if df is None:
            continue
        for d in batch:
            part = df[df["dt"] == d] if len(df) else df
            out[d][name] = sorted_day(name, part.reset_index(drop=True))
    return out


def _unpinned(logs, decisions) -> bool:
    """An input whose days have no file signature (a catalog table, a DataFrame): its stored days cannot tell
    whether the data changed since, so they are never reused (Store.usable); files are pinned by name, size and
    mtime (local files: the later of mtime and ctime, fs.changed_ns)."""
    return any(isinstance(sig, dict) and sig.get("unpinned")
               for sig in (day_signature(logs, None), day_signature(decisions, None)))


def _day_K(tables: dict, default: int) -> int:
    """The day's own K, the largest position of its clean rows (log_counts.k_max of that day), not the batch's: a
    window of that day alone reads it back (``default``: the batch's, when the day has no count)."""
    counts = tables.get("log_counts")
    if counts is None or not len(counts) or "k_max" not in counts:
        return default
    k = pd.to_numeric(counts["k_max"], errors="coerce").max()
    return 0 if pd.isna(k) else int(k)


def _store_batch(engine, store: Store, batch, per_day, res, logs_fp, dec_fp, run_id, unpinned: bool = False) -> None:
    """Write the batch's days: small tables, big tables (by the engine), then each day's manifest (the tables the
    day holds, the day's own K; ``unpinned``: never reused, see :func:`_unpinned`)."""
    for d in batch:
        store.invalidate(d)
        store.drop_legacy_ids(d)
        store.write_small(d, per_day[d])
    for name, rel in res.big.items():
        engine.write(f"SELECT {', '.join(big_columns()[name])} FROM {rel}", store.big_root(name), batch)
    for d in batch:
        present = set(per_day[d]) | set(res.big)
        extra = {"K": _day_K(per_day[d], res.K), "run_id": run_id, "bundle": True}
        store.write_manifest(d, logs_fp[d], dec_fp[d], present, {**extra, "unpinned": True} if unpinned else extra)

