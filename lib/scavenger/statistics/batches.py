"""How a window's missing days are cut into passes (batches of consecutive days), and whose event ids each pass
checks its own against (statistics/copies.IdScope): statistics/window.py runs the passes."""
from __future__ import annotations

from .copies import IdScope, old_ids, read_ahead, stale_days
from .scan import StatsConfig


def batches(missing: list, stored: set, size: int) -> list:
    """Consecutive runs of missing days (split at stored days), cut to ``size`` days (0: no cut)."""
    runs, cur = [], []
    for d in sorted(missing):
        if cur and any(cur[-1] < s < d for s in stored):
            runs.append(cur)
            cur = []
        cur.append(d)
    if cur:
        runs.append(cur)
    if size <= 0:
        return runs
    return [r[i:i + size] for r in runs for i in range(0, len(r), size)]


def id_scope(engine, logs, decisions, config: StatsConfig, store, missing: list, dates: list, batch_days,
              first_look) -> tuple:
    """(copies.IdScope, the missing days' old ids) of the run's passes. quarantine_all reads the missing days'
    ids ahead when another day's ids count (a store that holds other days, or several passes), and first makes
    stale every stored day that shares an id with them: those of the window are ``scope.again``, scanned in
    this run."""
    both = config.rules.duplicates == "quarantine_all"
    id_days = set(store.id_days()) if store else set()
    old = old_ids(engine, store, [d for d in missing if d in id_days]) if store else None
    scope = IdScope(both, id_days)
    if not (both and missing):
        return scope, old
    size = batch_days if batch_days is not None else auto_batch_days(engine, logs, decisions, missing)
    if not id_days - set(missing) and len(batches(missing, set(), size)) < 2:
        return scope, old
    scope.ahead = read_ahead(engine, logs, missing)
    scope.id_days -= set(missing)
    stale = stale_days(engine, store, [scope.ahead], old, {*missing, *first_look}, True) if store else []
    if stale:
        from ..progress import note

        note(f"{len(stale)} stored day(s) share event ids with a day read now (--duplicates quarantine_all flags "
             f"every copy): {', '.join(d.isoformat() for d in stale[:5])}{' ...' if len(stale) > 5 else ''}; "
             f"scanned again now when in the window, else when a window holds them")
        for d in stale:
            store.invalidate(d)
        scope.again = [d for d in stale if d in set(dates)]
    return scope, old


def auto_batch_days(engine, logs, decisions, days) -> int:
    """Days per pass when nobody chose (``--batch-days``): all in one pass unless the engine says how many input
    rows it holds in memory (DuckDB: its memory limit over ROW_BYTES) and the days' Parquet files (row counts from
    their footers) hold more, then as many days as fit. A batch that fits runs in memory instead of spilling: 100M
    events in one DuckDB pass took 651 s at its memory limit."""
    budget = getattr(engine, "row_budget", 0)
    if not budget or not days:
        return 0
    rows = {}
    for d in days:
        n = [day_rows(s, d) for s in (logs, decisions) if s is not None]
        if any(x is None for x in n):
            return 0
        rows[d] = sum(n)
    if sum(rows.values()) <= budget:
        return 0
    return max(1, int(budget // max(max(rows.values()), 1)))


def day_rows(source, day) -> int | None:
    """Rows of a file source's day from the Parquet footers; None when not known without reading rows."""
    from ..io import fs

    if source.kind != "files" or None in source.days:
        return None
    return fs.parquet_rows(f for group in source.days.get(day, []) for f in group.files)
