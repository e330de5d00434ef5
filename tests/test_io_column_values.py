"""io/column_values: whether an input holds a value (evaluate --baseline before any engine starts) agrees with the
set of its distinct values, on files of several row groups, dictionary-encoded, large and numeric columns, files
without the column and in-memory tables; and a row group whose statistics rule the value out is not read."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scavenger.io import column_values as CV
from scavenger.io.sources import FileGroup, Source


def _files_source(tmp_path, tables: list) -> Source:
    days = {}
    for n, t in enumerate(tables):
        day = dt.date(2026, 1, 1 + n)
        path = tmp_path / f"dt={day.isoformat()}" / "part-0.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(t, path, row_group_size=40)
        days[day] = [FileGroup(files=[str(path)], schema=t.schema, dt=day)]
    return Source(kind="files", name=str(tmp_path), uri=str(tmp_path), days=days, flag="--decisions")


def _policies(rng, n: int, names: list) -> list:
    return sorted(rng.choice(names, size=n).tolist())        # sorted: each row group holds a narrow range


def test_holds_agrees_with_the_distinct_values(tmp_path):
    rng = np.random.default_rng(7)
    names = [f"p{i:02d}" for i in range(30)]
    text = pa.table({"policy_id": _policies(rng, 200, names[:20]), "x": np.arange(200)})
    dictionary = pa.table({"policy_id": pa.array(_policies(rng, 120, names[10:25])).dictionary_encode()})
    large = pa.table({"policy_id": pa.array(_policies(rng, 90, names[5:12]), pa.large_string())})
    numbers = pa.table({"policy_id": pa.array(rng.integers(0, 5, 60))})       # no text id equals a number
    without = pa.table({"other": ["p29"] * 10})                                 # the pass reports such a file
    src = _files_source(tmp_path, [text, dictionary, large, numbers, without])
    have = CV.column_values(src, "policy_id")
    assert have == set(text["policy_id"].to_pylist()) | set(dictionary["policy_id"].to_pylist()) \
        | set(large["policy_id"].to_pylist()) | set(numbers["policy_id"].to_pylist())
    for value in [*names, "", "zz", "p0", "p00 "]:
        assert CV.column_holds(src, "policy_id", value) is (value in have), value


def test_a_row_group_the_statistics_rule_out_is_not_read(tmp_path, monkeypatch):
    ids = [f"p{i:03d}" for i in range(400)]            # sorted: 10 row groups of 40 distinct ranges
    src = _files_source(tmp_path, [pa.table({"policy_id": ids})])
    read = []
    real = pq.ParquetFile.read_row_group

    def counted(self, i, *a, **k):
        read.append(i)
        return real(self, i, *a, **k)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    assert CV.column_holds(src, "policy_id", "p123") is True
    assert read == [3]                                 # rows 120..159 only
    read.clear()
    assert CV.column_holds(src, "policy_id", "p123x") is False
    assert read == [3]                                 # within that group's range, read, and absent
    read.clear()
    assert CV.column_holds(src, "policy_id", "q") is False and read == []


def test_in_memory_and_catalog_sources():
    t = pa.table({"policy_id": pa.array(["a", "b", None]).dictionary_encode()})
    src = Source(kind="arrow", name="<pyarrow Table>", obj=t)
    assert CV.column_holds(src, "policy_id", "b") is True and CV.column_holds(src, "policy_id", "c") is False
    assert CV.column_values(src, "policy_id") == {"a", "b", None}
    assert CV.column_holds(Source(kind="table", name="db.t", obj="db.t"), "policy_id", "a") is None


@pytest.mark.parametrize("value", ["det", "no_such_policy"])
def test_baseline_check_reads_the_decisions_files(tmp_path, value):
    from scavenger.errors import UsageError
    from scavenger.pipelines.running import check_baseline_name

    src = _files_source(tmp_path, [pa.table({"policy_id": ["det", "soft"] * 30})])
    if value == "det":
        assert check_baseline_name(value, [], src) is None
    else:
        with pytest.raises(UsageError, match="policies read: det, soft"):
            check_baseline_name(value, [], src)
