"""The --by-day windows and running/'s prefixes, several at a time: each window's estimators are pure pandas/numpy
over the stored per-day sums (no engine, no I/O), so they run in forked worker processes, contiguous chunks of them,
and come back in order. What they read from the engine (the one-statement reductions over its big tables) is put in
the run's shared cache here first: each job's ``prepare()`` (the estimators' ``windows`` hooks,
estimators/declaration.Estimator), or, for a job without one, its first window run here. Both jobs (the by-day
windows, the prefixes) start together (:func:`start`) before the window's own estimators run here, so those run
while the workers work. A :class:`Job` whose chunks cost more at their start (``contiguous``: running/'s prefixes,
whose first merges every day before it) is cut into one chunk per worker and sent first; the others into two per
worker, which fill in. The rows are the same as one at a time (tests/test_pipelines_window_pool.py).

One at a time instead (the rows are the same; only the time differs), when the results are asked for:
- ``SCAVENGER_WINDOW_WORKERS=1`` (or a count: the workers at most);
- an engine other than DuckDB (a forked copy of a Spark driver's gateway must not be touched), or no ``fork``;
- a daemonic process (it may not have children), or fewer than :data:`MIN_WINDOWS` windows.

A worker never touches the engine: its statistics' engine is a stub that raises, and a chunk that needs the engine, or
fails in any way, is run again here, one window at a time, where the error (if any) is raised as it would be. A
worker that dies (out of memory: BrokenProcessPool), or a pool that cannot start or send its rows back, does the
same for every chunk, with a warning on stderr.

Measured (30 days of 20,000 slotted events, --by-day --baseline logging, 2 cores): the 30 days' and 30 prefixes'
estimators took 5.2 s one at a time at first, 3.1 s with two workers per job one job after the other; with both jobs
started together while the window's own estimators run, prepared rather than headed by a window here, and about 40%
less work per window (benchmarks/RESULTS.md), the whole run costs 1.1-1.2x a plain evaluate.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, NamedTuple

WORKERS_ENV = "SCAVENGER_WINDOW_WORKERS"
MIN_WINDOWS = 6           # fewer windows: one at a time (a fork and the pickled rows cost more than they save)
MAX_WORKERS = 4
_JOB: tuple | None = None  # (statistics, [chunk function of each job]) being started: what a forked worker reads


class EngineInWorker(RuntimeError):
    """A window's estimator asked the engine for something inside a worker: its chunk runs again in the parent."""


class _NoEngine:
    def __getattr__(self, name):
        raise EngineInWorker(f"the engine's {name!r} inside a window worker")


def worker_count(engine, n_windows: int) -> int:
    """How many workers the windows get (1: one at a time, here): see the module doc."""
    wanted = os.environ.get(WORKERS_ENV, "").strip()
    try:        # checked with the DuckDB settings before any engine starts (exit 2); a value set since: one at a time
        cap = int(wanted) if wanted else MAX_WORKERS
    except ValueError:
        print(f"warning: {WORKERS_ENV}={wanted!r} is not a count of workers; the windows run one at a time",
              file=sys.stderr)
        cap = 1
    if cap <= 1 or n_windows < MIN_WINDOWS or getattr(engine, "name", None) != "duckdb":
        return 1
    if "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cap, cpus, n_windows // 3))


def chunks(items: list, n: int) -> list:
    """``items`` cut into ``n`` contiguous runs, as even as can be (none empty)."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


class Job(NamedTuple):
    """Windows to run (:func:`start`): ``run_chunk(list of items) -> list of results``; ``prepare()``: what the
    items read from the engine, into the shared cache (None: the first item runs here and fills it); ``contiguous``:
    a chunk's first item costs more than the next ones (running/'s prefixes merge every day before it, and their
    confidence sequences' earlier blocks), so the job is cut into one chunk per worker, not two."""

    items: list
    run_chunk: Callable
    prepare: Callable | None = None
    contiguous: bool = False


class Started:
    """Jobs (:class:`Job`, or (items, run_chunk)) under way (:func:`start`): :meth:`results` gives each job's
    results, in order; :meth:`close` stops what is left (an error in the parent meanwhile)."""

    def __init__(self, stats, jobs: list, workers: int):
        global _JOB
        jobs = self.jobs = [Job(*job) for job in jobs]
        self.pool = None
        self.heads: list = [None] * len(self.jobs)
        self.parts: list = [[] for _ in self.jobs]      # per job: [(chunk, future or None)]
        if workers <= 1 or sum(len(job.items) for job in jobs) < 2:
            return                          # one at a time, when the results are asked for
        self.parts = []
        for j, job in enumerate(jobs):
            if job.prepare is not None:     # what the job's items read from the engine, into the shared cache
                job.prepare()
                self.heads[j], left = [], list(job.items)
            else:                           # the first item fills the shared cache
                self.heads[j] = job.run_chunk(list(job.items[:1])) if job.items else []
                left = list(job.items[1:])
            # other jobs in twice as many chunks as workers: a worker done early takes the next
            pieces = workers if job.contiguous else 2 * workers
            self.parts.append([(c, None) for c in chunks(left, pieces) if c])
        _JOB = (stats, [job.run_chunk for job in jobs])
        try:
            self.pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))
            futures = {(j, i): self.pool.submit(_in_worker, j, c)
                       for j, i, c in _largest_first(self.parts, [job.contiguous for job in jobs])}
            self.parts = [[(c, futures[j, i]) for i, (c, _) in enumerate(parts)]
                          for j, parts in enumerate(self.parts)]
        except Exception as exc:            # noqa: BLE001 - no fork, no process: one at a time, here
            _stopped(exc)
            self.close()
            self.parts = [[(c, None) for c, _ in parts] for parts in self.parts]
        finally:
            _JOB = None                     # the workers hold their copy (forked at the first submit)

    def results(self) -> list:
        """Each job's results, in order (a chunk a worker did not give back: run here)."""
        out, warned = [], False
        try:
            for j, (items, run_chunk, *_) in enumerate(self.jobs):
                if self.heads[j] is None:
                    out.append(run_chunk(list(items)) if items else [])
                    continue
                rows = list(self.heads[j])
                for chunk, future in self.parts[j]:
                    got = None
                    if future is not None:
                        try:
                            got = future.result()
                        except Exception as exc:    # noqa: BLE001 - a worker died (BrokenProcessPool), no pickle
                            if not warned:
                                _stopped(exc)
                                warned = True
                    rows += got if got is not None else run_chunk(chunk)
                out.append(rows)
        finally:
            self.close()
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _largest_first(parts: list, contiguous: list) -> list:
    """[(job, chunk index, chunk)] of every job's chunks, the contiguous jobs' first (running/'s prefixes: each
    costs more than a day, and their chunks are longer), then by size: the longest start first, and the small
    chunks of the other jobs fill in, so the workers end together."""
    order = [(j, i, c) for j, job in enumerate(parts) for i, (c, _) in enumerate(job)]
    return sorted(order, key=lambda x: (not contiguous[x[0]], -len(x[2])))


def start(stats, jobs: list, workers: int) -> Started:
    """Start ``jobs`` (:class:`Job`, or (items, run_chunk)): ``prepare()`` here (what the items read from the
    engine, into the shared cache), or without one the job's first item here (it fills that cache), then the rest
    of every job in contiguous chunks by ``workers`` forked processes, while this process goes on; ``.results()``
    waits for them (see the module doc)."""
    return Started(stats, jobs, workers)


def _stopped(exc: Exception) -> None:
    print(f"warning: the window workers stopped ({type(exc).__name__}: {str(exc)[:200]}); the windows run "
          f"one at a time", file=sys.stderr)


def _in_worker(job: int, part: list):
    """A chunk of job ``job`` in a forked worker: its results, or None to run it again in the parent (the engine
    was asked for, or anything failed: the parent raises the error where it belongs)."""
    stats, run_chunks = _JOB
    stats.engine = _NoEngine()          # this process's copy only
    try:
        return run_chunks[job](part)
    except Exception:                   # noqa: BLE001 - run again in the parent, which raises it
        return None
