"""The --by-day windows and running/'s prefixes run several at a time (pipelines/window_pool.py): the same rows as one
at a time (1e-12), days without logs included; a chunk that asks for the engine or fails inside a worker runs again
in the parent (where its error is raised); and the rules that keep the windows one at a time."""
from __future__ import annotations

import pandas as pd
import pytest

from helpers.reference import build_random, write_parquet
from scavenger.cli import main
from scavenger.pipelines import window_pool as P


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    # 8 days with logs and two without (2026-03-04 and 2026-03-08) inside --from..--to
    data = build_random(seed=11, K=2, n_ads=5, days=(0, 1, 2, 4, 5, 6, 8, 9), per_day=150,
                        logging_policies=("lp_a",), with_nulls=True)
    logs, decs = write_parquet(data, str(root / "in"))
    return logs, decs, root


def _run(dataset, workers: str, monkeypatch) -> dict:
    logs, decs, root = dataset
    monkeypatch.setenv(P.WORKERS_ENV, workers)
    out = root / f"out_{workers}"
    assert main(["evaluate", "--engine", "duckdb", "--gate", "off", "--logs", logs, "--decisions", decs,
                 "--from", "2026-03-01", "--to", "2026-03-10", "--out", str(out), "--by-day",
                 "--baseline", "logging", "--estimators", "all"]) == 0
    return {t: _read(out / t) for t in ("estimates_by_day", "running")}


def _read(path) -> pd.DataFrame:
    parts = sorted(path.glob("dt=*"))
    df = pd.concat([pd.read_parquet(p).assign(dt=p.name.split("=", 1)[1]) for p in parts], ignore_index=True)
    keys = [c for c in ("dt", "policy_id", "baseline_id", "estimator", "interval_kind") if c in df.columns]
    return df.sort_values(keys, na_position="first").reset_index(drop=True)


def test_several_at_a_time_equal_one_at_a_time(dataset, monkeypatch):
    calls = []
    real = P.start

    def spy(stats, jobs, workers):
        calls.append((len(jobs), workers))
        return real(stats, jobs, workers)
    monkeypatch.setattr(P, "start", spy)
    one = _run(dataset, "1", monkeypatch)
    monkeypatch.setattr(P, "worker_count", lambda engine, n: 2 if n >= P.MIN_WINDOWS else 1)
    two = _run(dataset, "2", monkeypatch)
    assert calls == [(2, 1), (2, 2)]       # by-day and running/ started together: one at a time, two workers
    for table in ("estimates_by_day", "running"):
        assert len(one[table]) and set(one[table]["dt"]) == set(two[table]["dt"])
        # equal to 1e-12, as a fresh run over a prefix is: a worker's first prefix merges its days at once, and
        # DuckDB's threads sum in no fixed order (two runs one at a time differ by ~1e-16 too)
        pd.testing.assert_frame_equal(one[table], two[table], check_exact=False, rtol=1e-12, atol=1e-12)
    days = one["estimates_by_day"]
    assert days.loc[days["dt"] == "2026-03-08", "reason"].str.startswith("no logs on 2026-03-08").all()
    assert len(set(one["running"]["dt"])) == 8


def _map(stats, items, run_chunk, workers):
    """One job of window_pool.start: its results, in order."""
    return P.start(stats, [(items, run_chunk)], workers).results()[0]


class _Engine:
    name = "duckdb"

    def fetch(self, x):
        return x * 10


class _Stats:
    engine = _Engine()


def test_a_chunk_that_asks_for_the_engine_runs_again_in_the_parent():
    import os

    parent, stats = os.getpid(), _Stats()

    def run_chunk(part):
        return [(x, stats.engine.fetch(x) if x == 5 else x, os.getpid() == parent) for x in part]
    got = _map(stats, list(range(9)), run_chunk, 2)
    assert [g[0] for g in got] == list(range(9))
    assert [g[1] for g in got] == [0, 1, 2, 3, 4, 50, 6, 7, 8]
    here = {g[0] for g in got if g[2]}
    assert {0, 5} <= here                 # the first here (it fills the shared cache); 5's chunk again here
    assert here != set(range(9))          # the other chunk in a worker
    assert isinstance(stats.engine, _Engine)


def test_an_error_inside_a_worker_is_raised_by_the_parent():
    def run_chunk(part):
        if 7 in part:
            raise ValueError("window 7 is bad")
        return part
    with pytest.raises(ValueError, match="window 7 is bad"):
        _map(_Stats(), list(range(9)), run_chunk, 2)


def test_when_the_windows_run_one_at_a_time(monkeypatch):
    monkeypatch.delenv(P.WORKERS_ENV, raising=False)
    duck = _Engine()
    spark = type("Spark", (), {"name": "spark"})()
    assert P.worker_count(spark, 30) == 1                      # a Spark driver is never forked
    assert P.worker_count(duck, P.MIN_WINDOWS - 1) == 1        # too few windows
    monkeypatch.setenv(P.WORKERS_ENV, "1")
    assert P.worker_count(duck, 30) == 1
    monkeypatch.setenv(P.WORKERS_ENV, "many")
    assert P.worker_count(duck, 30) == 1
    monkeypatch.setenv(P.WORKERS_ENV, "2")
    assert 1 <= P.worker_count(duck, 30) <= 2


def test_chunks_are_contiguous_and_even():
    assert P.chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert P.chunks([1], 4) == [[1]]
    assert sum(P.chunks(list(range(30)), 4), []) == list(range(30))


def test_jobs_started_together_come_back_in_order_while_the_parent_works():
    import os

    parent = os.getpid()
    started = P.start(_Stats(), [(list(range(7)), lambda part: [(x, os.getpid() == parent) for x in part]),
                                 (list("abcdefg"), lambda part: [c.upper() for c in part])], 2)
    here = sum(range(10 ** 5))              # the parent goes on meanwhile
    got, letters = started.results()
    assert here == 4999950000 and [x for x, _ in got] == list(range(7)) and letters == list("ABCDEFG")
    assert got[0][1] and not all(h for _, h in got)     # the first here, the others in workers
    assert P.start(_Stats(), [([1, 2, 3], lambda part: [-x for x in part]), ([], None)], 1).results() == \
        [[-1, -2, -3], []]


def test_a_job_that_prepares_sends_every_item_to_the_workers():
    """With ``prepare`` (what the items read from the engine, into the shared cache), no item runs here: prepare
    runs here first, then every item in a worker, which sees what prepare left; the results come back in order."""
    import os

    parent, shared = os.getpid(), {}

    def prepare():
        shared["sums"] = {x: x * 10 for x in range(9)}     # as the engine would give them
        return os.getpid()

    def run_chunk(part):
        return [(x, shared["sums"][x], os.getpid() == parent) for x in part]
    got = P.start(_Stats(), [(list(range(9)), run_chunk, prepare), (list("ab"), lambda part: part)], 2).results()
    assert [g[:2] for g in got[0]] == [(x, x * 10) for x in range(9)] and got[1] == ["a", "b"]
    assert not any(here for *_, here in got[0])        # every item in a worker
    assert shared["sums"][3] == 30


def test_the_contiguous_jobs_chunks_start_first_then_the_longest():
    parts = [[([1, 2], None), ([3], None)], [([4, 5, 6], None), ([7, 8], None)], [([9], None), ([1, 2], None)]]
    assert [(j, i) for j, i, _ in P._largest_first(parts, [False, True, False])] == \
        [(1, 0), (1, 1), (0, 0), (2, 1), (0, 1), (2, 0)]


def test_a_worker_that_dies_leaves_its_windows_to_the_parent(capsys):
    import os

    parent = os.getpid()

    def run_chunk(part):
        if os.getpid() != parent and 6 in part:
            os._exit(1)                   # a worker killed (out of memory, say)
        return [x * 2 for x in part]
    assert _map(_Stats(), list(range(9)), run_chunk, 2) == [x * 2 for x in range(9)]
    assert "the window workers stopped (BrokenProcessPool" in capsys.readouterr().err
