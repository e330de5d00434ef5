"""Event-id copies across days (DUPLICATE_EVENT_ID beyond one pass): which other days' ids a pass checks its rows
against, and which stored days a day read now makes stale. A window read partly from the store, or in several
passes, flags the same rows as one cold pass over every day.

- keep_first (the default) flags every copy after the first. A pass looks back, at the ids of the days before
  it (:func:`other_days`). A day read now that repeats, or no longer holds, ids of stored later days (a backfill,
  a re-delivery) makes those days stale (:func:`stale_days`): they are scanned again.
- quarantine_all flags every copy. A pass looks both ways: at the ids of every other day the store holds and of
  the days this run scans, read ahead of the passes (:func:`read_ahead`, one column of the logs). A day read now
  makes stale every stored day, earlier or later, that shares an id with it, before the passes run: one in the
  window is scanned in this run, one outside it is scanned again when a window holds it.

A stale day keeps its ids in the store (Store.id_days), so a pass still checks against them.
"""
from __future__ import annotations

import pandas as pd

from ..contract import LOGS, load_contract
from ..io import fs
from .sql import logs as L
from .store import LEGACY_IDS, Store


def stored_ids(engine, store: Store, days: list, name: str) -> str | None:
    """Relation ``name`` of (dt, id_hash) of the event ids of stored ``days``, those of days stored as hex text
    (Store.legacy_id_files) read as the same integers (sql/logs.id_hash_of); None when the days hold none."""
    files, legacy = store.big_files("event_ids", days), store.legacy_id_files(days)
    parts = []
    if files:
        engine.read_parquet(f"{name}_int", files, root=store.big_root("event_ids"))
        parts.append(f"SELECT dt, id_hash FROM {name}_int")
    if legacy:
        engine.read_parquet(f"{name}_hex", legacy, root=fs.join(store.uri, LEGACY_IDS))
        parts.append(f"SELECT dt, {L.id_hash_of('id_hash')} AS id_hash FROM {name}_hex")
    if not parts:
        return None
    engine.view(name, " UNION ALL ".join(parts))
    return name


def old_ids(engine, store: Store, days: list) -> str | None:
    """Relation scv_old_ids: the ids the store holds for ``days`` about to be scanned again, kept before the
    passes replace them: a re-delivered day that no longer holds an id changes the flags of the days that share
    it. None when the days hold none (new days)."""
    rel = stored_ids(engine, store, days, "scv_old_stored") if days else None
    if rel is None:
        return None
    engine.materialize("scv_old_ids", f"SELECT dt, id_hash FROM {rel}", keep=True)
    return "scv_old_ids"


def read_ahead(engine, logs, days: list) -> str:
    """quarantine_all: relation scv_ahead_ids (dt, id_hash) of the event ids of ``days``, read before their
    passes, so that each pass also flags its copies of ids a later pass holds (as one pass over every day does)."""
    engine.read("scv_ahead_logs", logs, load_contract(LOGS), days)
    engine.materialize("scv_ahead_ids", L.ahead_ids("scv_ahead_logs"), keep=True)
    return "scv_ahead_ids"


def other_days(id_days, batch: list, both_ways: bool) -> list:
    """The days whose stored ids a pass over ``batch`` checks its rows against: those before it (keep_first), or
    every day not in it (quarantine_all)."""
    return sorted(d for d in id_days if d not in set(batch) and (both_ways or d < min(batch)))


def not_in(relation: str, batch: list) -> str:
    """SELECT of ``relation``'s ids of the days outside ``batch`` (the read-ahead ids of the other passes)."""
    days = ", ".join(f"DATE '{d.isoformat()}'" for d in batch)
    return f"SELECT id_hash FROM {relation} WHERE dt NOT IN ({days})"


def stale_days(engine, store: Store, new: list, old: str | None, exclude, both_ways: bool) -> list:
    """Stored days (with a manifest, not in ``exclude``: the days read now, never empty) whose flags a day read now
    changes: they share an id that the days read now gained or lost, their ids now (the (dt, id_hash) relations
    ``new``) against those the store held for them (``old``: none for a new day; a day read again unchanged gains
    and loses none). Later days only (keep_first: only a later copy's flag depends on an earlier day), or earlier
    ones too (``both_ways``)."""
    first = min(exclude)
    days = [d for d in store.stored_days() if d not in set(exclude) and (both_ways or d > first)]
    ids = stored_ids(engine, store, days, "scv_stale_ids") if days and new else None
    if ids is None:
        return []
    now = " UNION ALL ".join(f"SELECT dt, id_hash FROM {r}" for r in new)
    if old:     # each side's EXCEPT in its own subquery: EXCEPT and UNION bind alike, left to right
        now, was = f"SELECT dt, id_hash FROM ({now}) v", f"SELECT dt, id_hash FROM {old}"
        changed = f"SELECT * FROM ({now} EXCEPT {was}) g UNION ALL SELECT * FROM ({was} EXCEPT {now}) l"
    else:
        changed = now
    hits = engine.fetch(f"SELECT DISTINCT s.dt AS dt FROM {ids} s JOIN ({changed}) n "
                        f"ON s.id_hash = n.id_hash AND {'s.dt <> n.dt' if both_ways else 's.dt > n.dt'}",
                        "stale_days")
    return sorted(pd.to_datetime(hits["dt"]).dt.date.unique().tolist()) if len(hits) else []


class IdScope:
    """The other days' ids a run's passes check their rows against (see the module docstring): the days whose ids
    the store holds (``id_days``, the missing days left out when their ids are read ahead) and the read-ahead ids
    (``ahead``, quarantine_all)."""

    def __init__(self, both_ways: bool, id_days, ahead: str | None = None):
        self.both_ways, self.id_days, self.ahead = both_ways, set(id_days), ahead
        self.again: list = []       # stored days of the window made stale up front: scanned in this run

    def relations(self, engine, store: Store | None, batch: list, earlier_passes: list) -> list:
        """The relations (with an id_hash column) a pass over ``batch`` checks against: the stored ids of
        :func:`other_days` (without a store, this run's earlier passes), and the other passes' read-ahead ids."""
        rels = []
        if store:
            days = other_days(self.id_days, batch, self.both_ways)
            prior = stored_ids(engine, store, days, "scv_prior_stored") if days else None
            rels += [prior] if prior else []
        else:
            rels += list(earlier_passes)
        if self.ahead:
            engine.view("scv_ahead_other", not_in(self.ahead, batch))
            rels.append("scv_ahead_other")
        return rels

    def stored(self, batch: list) -> None:
        """A pass's days were written to the store: later passes read their ids there (unless read ahead)."""
        if not self.ahead:
            self.id_days |= set(batch)
