"""Inputs as users write them (issue 26 item 3): Parquet written by pandas, pyarrow, DuckDB and Polars with their
defaults (nanosecond timestamps, int64 positions, large strings, maps as lists of pairs) gives the same
statistics as the Spark-written original; a file fixed in place beside Spark's stale checksum reads as it is now;
a column that cannot be converted, a truncated or a non-Parquet file exit 2 naming the file (and the column and
types)."""
from __future__ import annotations

import glob
import json
import os
import shutil

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.reference import build_random, write_parquet
from scavenger.cli import main


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    root = tmp_path_factory.mktemp("orig")
    data = build_random(seed=6, K=3, n_ads=6, days=(0, 1), per_day=80, with_nulls=False)
    write_parquet(data, str(root))
    return str(root)


def _evaluate(logs, decisions, out, engine="duckdb") -> pd.DataFrame:
    code = main(["evaluate", "--logs", logs, "--decisions", decisions, "--out", str(out), "--engine", engine,
                 "--estimators", "pi,ips,scavenging", "--policies", "det,sto", "--gate", "report",
                 "--no-great-expectations"])       # perm re-orders the logged slate: none of these three estimates it
    assert code == 0
    return pd.read_parquet(f"{out}/estimates").sort_values(["policy_id", "estimator", "interval_kind"])


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert a[["policy_id", "estimator"]].values.tolist() == b[["policy_id", "estimator"]].values.tolist()
    pd.testing.assert_series_equal(a["value"].reset_index(drop=True), b["value"].reset_index(drop=True), rtol=1e-12)
    assert a["n_events"].tolist() == b["n_events"].tolist()


def _rewrite(src: str, dst: str, writer) -> None:
    shutil.copytree(src, dst)
    for f in glob.glob(f"{dst}/dt=*/*.parquet"):
        table = pq.read_table(f)
        os.remove(f)
        writer(table, f)


def _pandas(table, path):
    df = table.to_pandas()                       # maps become lists of pairs, timestamps datetime64[ns]
    df["slots"] = [[{**s, "position": int(s["position"])} for s in v] for v in df["slots"]]
    df.to_parquet(path.replace(".parquet", "-pd.parquet"), index=False)


def _widen(t):
    """int32 -> int64, string -> large_string, inside structs and lists too (pyarrow users' usual types)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _widen(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_widen(t.value_type))
    if pa.types.is_int32(t):
        return pa.int64()
    if pa.types.is_string(t):
        return pa.large_string()
    return t


def _pyarrow(table, path):
    t = table.set_column(table.schema.get_field_index("slots"), "slots",
                         table["slots"].cast(_widen(table.schema.field("slots").type)))
    t = t.set_column(t.schema.get_field_index("event_id"), "event_id", t["event_id"].cast(pa.large_string()))
    if "event_time" in t.schema.names:
        t = t.set_column(t.schema.get_field_index("event_time"), "event_time",
                         t["event_time"].cast(pa.timestamp("ns")))
    pq.write_table(t, path)


def _polars(table, path):
    import polars as pl

    pl.from_arrow(table).write_parquet(path.replace(".parquet", "-pl.parquet"))


@pytest.mark.parametrize("writer", [_pandas, _pyarrow, _polars])
def test_writers_defaults_read_like_the_original(original, tmp_path, writer):
    if writer is _polars:
        pytest.importorskip("polars")
    base = _evaluate(f"{original}/logs", f"{original}/decisions", tmp_path / "base")
    _rewrite(f"{original}/logs", str(tmp_path / "logs"), writer)
    _rewrite(f"{original}/decisions", str(tmp_path / "decisions"), writer)
    _same(base, _evaluate(str(tmp_path / "logs"), str(tmp_path / "decisions"), tmp_path / "out"))


def test_duckdb_written_dataset_reads_like_the_original(original, tmp_path):
    base = _evaluate(f"{original}/logs", f"{original}/decisions", tmp_path / "base")
    con = duckdb.connect()
    for name in ("logs", "decisions"):
        con.execute(f"COPY (SELECT * FROM read_parquet('{original}/{name}/*/*.parquet', hive_partitioning = true, "
                    f"hive_types = {{'dt': DATE}})) TO '{tmp_path}/{name}' (FORMAT PARQUET, PARTITION_BY (dt))"
                    ).fetchall()
    _same(base, _evaluate(f"{tmp_path}/logs", f"{tmp_path}/decisions", tmp_path / "out"))


def test_mixed_writers_and_a_file_fixed_in_place_on_spark(spark, original, tmp_path):
    """Spark reads day 1 rewritten by pyarrow (nanosecond timestamps) in place beside a stale .crc, and day 2
    written by pandas, with the same numbers as DuckDB on the original."""
    base = _evaluate(f"{original}/logs", f"{original}/decisions", tmp_path / "base")
    root = tmp_path / "mixed"
    shutil.copytree(f"{original}/logs", root)
    days = sorted(glob.glob(f"{root}/dt=*"))
    f1 = glob.glob(f"{days[0]}/*.parquet")[0]
    with open(os.path.join(days[0], f".{os.path.basename(f1)}.crc"), "wb") as fh:
        fh.write(b"stale checksum")
    _pyarrow(pq.read_table(f1), f1)
    f2 = glob.glob(f"{days[1]}/*.parquet")[0]
    t2 = pq.read_table(f2)
    os.remove(f2)
    _pandas(t2, f2)
    _same(base, _evaluate(str(root), f"{original}/decisions", tmp_path / "out", engine="spark"))


def test_column_that_cannot_convert_is_exit_2_naming_file_column_and_types(original, tmp_path, capsys):
    root = tmp_path / "bad"
    shutil.copytree(f"{original}/logs", root)
    f = glob.glob(f"{root}/dt=*/*.parquet")[0]
    t = pq.read_table(f)
    t = t.set_column(t.schema.get_field_index("slots"), "slots", pa.array(["x"] * t.num_rows))
    pq.write_table(t, f)
    out = tmp_path / "out"
    assert main(["evaluate", "--logs", str(root), "--decisions", f"{original}/decisions", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f in err and "column slots" in err and "string" in err and "array<struct<position:int" in err
    assert not out.exists()


@pytest.mark.parametrize("damage", ["truncated", "not_parquet"])
def test_truncated_or_foreign_file_is_exit_2_naming_it(original, tmp_path, capsys, damage):
    root = tmp_path / "bad"
    shutil.copytree(f"{original}/logs", root)
    f = glob.glob(f"{root}/dt=*/*.parquet")[0]
    with open(f, "rb") as fh:
        body = fh.read()
    with open(f, "wb") as fh:
        fh.write(body[: len(body) // 2] if damage == "truncated" else b"event_id,slots\n1,2\n")
    assert main(["adc", "--logs", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f in err and "not a readable Parquet file" in err


def _log_counts(out) -> dict:
    import json

    with open(f"{out}/result.json") as fh:
        return json.load(fh)["counts"]["logs"]


def test_columns_of_null_type_read_as_nulls(original, tmp_path):
    """A zero-row file pandas writes from an empty frame, and a file whose slots are all None, hold columns of Arrow
    type null: they read as nulls (their rows quarantined as EMPTY_SLATE), not an internal error."""
    root = tmp_path / "logs"
    shutil.copytree(f"{original}/logs", root)
    day = sorted(glob.glob(f"{root}/dt=*"))[0]
    t = pq.read_table(glob.glob(f"{day}/*.parquet")[0])
    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in t.schema.names})
    empty.to_parquet(f"{day}/empty.parquet", index=False)
    pq.write_table(t.slice(0, 5).set_column(t.schema.get_field_index("slots"), "slots", pa.nulls(5))
                   .set_column(t.schema.get_field_index("event_id"), "event_id", pa.array([f"n{i}" for i in range(5)])),
                   f"{day}/null_slots.parquet")
    out = tmp_path / "out"
    assert main(["validate", "--logs", str(root), "--out", str(out), "--engine", "duckdb", "--no-great-expectations",
                 "--max-quarantine-share", "1"]) == 0
    c = _log_counts(out)
    assert c["rows_in"] == 165 and c["rows_quarantined"] == 5 and c["by_reason"] == {"EMPTY_SLATE": 5}


def test_rows_without_a_date_are_counted_and_judged(original, tmp_path, capsys):
    """A file holding a dt column whose value is null or not a date for some rows: no day holds those rows, so they
    are counted (``rows_without_dt``) and judged like quarantined rows, never dropped unseen."""
    t = pq.read_table(f"{original}/logs")
    dts = t["dt"].cast(pa.string()).to_pylist()
    t = t.set_column(t.schema.get_field_index("dt"), "dt", pa.array([None, "never"] + dts[2:]))
    f = tmp_path / "all.parquet"
    pq.write_table(t, f)
    args = ["validate", "--logs", str(f), "--engine", "duckdb", "--no-great-expectations"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 3
    assert "2 impression_log row(s) have a null dt" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "b"), "--max-quarantine-share", "0.05"]) == 0
    c = _log_counts(tmp_path / "b")
    assert c["rows_in"] == 158 and c["rows_without_dt"] == 2


def test_dataframe_without_dt_or_with_unconvertible_columns(original):
    """A pandas frame without a dt column is a usage error saying so; an extra column Arrow cannot hold is not
    read; a contract column it cannot hold is a usage error naming it."""
    import scavenger
    from scavenger.errors import UsageError

    logs = pq.read_table(f"{original}/logs").to_pandas()
    with pytest.raises(UsageError, match="has no dt column"):
        scavenger.validate(logs.drop(columns="dt"), engine="duckdb", great_expectations=False)
    with pytest.raises(UsageError, match="event_id"):
        scavenger.validate(logs.assign(event_id=[object()] * len(logs)), engine="duckdb", great_expectations=False)
    r = scavenger.validate(logs.assign(extra=[object()] * len(logs)), engine="duckdb", great_expectations=False)
    assert r.counts["logs"]["rows_in"] == 160


def test_decision_days_the_logs_lack_are_counted_and_judged(original, tmp_path, capsys):
    """Decisions of a day inside --from..--to whose logs partition is missing: no pass reads them, so they are
    counted from their footers (``rows_without_logs``) and judged like quarantined rows (a failed input verdict:
    exit 3 under --gate enforce), never dropped unseen. The window's day without logs is named in result.json,
    on stderr and in the summary (the window read fewer days than asked without a word before), and the window's
    label is the one asked for."""
    logs = tmp_path / "logs"
    shutil.copytree(f"{original}/logs", logs)
    shutil.rmtree(sorted(glob.glob(f"{logs}/dt=*"))[-1])
    assert main(["evaluate", "--logs", str(logs), "--decisions", f"{original}/decisions", "--engine", "duckdb",
                 "--from", "2026-03-01", "--to", "2026-03-02", "--estimators", "pi", "--policies", "det,sto",
                 "--no-great-expectations", "--gate", "report", "--out", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "result.json") as fh:
        res = json.load(fh)
    c = res["counts"]["decisions"]
    assert c["rows_without_logs"] > 0 and c["days_without_logs"] == ["2026-03-02"]
    assert res["counts"]["days_without_logs"] == ["2026-03-02"]
    # the label is the window asked for (before, the days with logs: 2026-03-01..2026-03-01)
    assert res["summary"]["window"] == "2026-03-01..2026-03-02"
    assert set(pd.read_parquet(tmp_path / "out" / "estimates")["window"]) == {"2026-03-01..2026-03-02"}
    said = capsys.readouterr()
    assert "no logs on 1 day(s) of the window: 2026-03-02" in said.out and "no partition for 1 day(s)" in said.err
    assert any(v["check"] == "input" and v["verdict"] == "fail" and "the logs lack (2026-03-02)" in v["message"]
               for v in res["verdicts"])


def _untidy_tree(original, root) -> int:
    """The original's logs laid out as users leave them: a day split between dt=2026-03-01 and DT=2026-03-01
    (40 rows each), the other day under DT=2026-03-02 (80), and beside them a dt=2026-03-01.bak copy (80), a
    backup/ directory (80) and a loose file (80), plus writer metadata (_SUCCESS, .crc, _temporary/, .hidden/,
    _manifest.json) that holds no rows. Returns the rows of the visible Parquet files (400)."""
    logs = f"{original}/logs"
    day1, day2 = pq.read_table(f"{logs}/dt=2026-03-01"), pq.read_table(f"{logs}/dt=2026-03-02")
    day1, day2 = day1.drop_columns([c for c in ("dt",) if c in day1.column_names]), \
        day2.drop_columns([c for c in ("dt",) if c in day2.column_names])
    for sub, table in (("dt=2026-03-01", day1.slice(0, 40)), ("DT=2026-03-01", day1.slice(40)),
                       ("DT=2026-03-02", day2), ("dt=2026-03-01.bak", day1), ("backup", day1)):
        os.makedirs(f"{root}/{sub}")
        pq.write_table(table, f"{root}/{sub}/part-0.parquet")
    pq.write_table(day2, f"{root}/loose.parquet")
    for hidden in ("_temporary/0", ".hidden"):             # writer metadata: rows there are not the dataset's
        os.makedirs(f"{root}/{hidden}")
        pq.write_table(day1, f"{root}/{hidden}/part-0.parquet")
    for name in ("_SUCCESS", ".part-0.parquet.crc", "_manifest.json"):
        open(f"{root}/{name}", "w").write("{}")
    open(f"{root}/dt=2026-03-01/_SUCCESS", "w").close()
    return 40 + 40 + 80 + 80 + 80 + 80


def test_every_parquet_file_under_logs_is_read_or_counted(original, tmp_path, capsys, engine="duckdb"):
    """Every visible Parquet file under --logs is read or counted: a DT=YYYY-MM-DD directory is that day's (Spark
    matches partition names case-insensitively by default, Hive lower-cases them), also beside a dt= directory of
    the same day; a directory or file beside the dt= directories (backup/, loose.parquet) and a dt= directory
    holding no date are named on stderr and counted as rows without a date. Before, the DT= directories, backup/
    and the loose file vanished: rows_in 40 of 400 on disk, no word. Hidden names stay writer metadata."""
    root = tmp_path / "logs"
    on_disk = _untidy_tree(original, root)
    argv = ["validate", "--logs", str(root), "--engine", engine, "--no-great-expectations"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 3          # 240 of 400 rows have no day: over 0.1%
    captured = capsys.readouterr()
    c = _log_counts(tmp_path / "a")
    assert (c["rows_in"], c["rows_used"], c["rows_quarantined"], c["rows_without_dt"]) == (160, 160, 0, 240)
    assert c["rows_in"] + c["rows_without_dt"] == on_disk
    assert [(d["dt"], d["rows"], d["used"]) for d in c["by_dt"]] == [("2026-03-01", 80, 80), ("2026-03-02", 80, 80)]
    assert "skipped 1 directory whose name holds no date (dt=2026-03-01.bak)" in captured.err
    assert "skipped 2 entries beside the dt=YYYY-MM-DD directories (backup, loose.parquet)" in captured.err
    assert "_temporary" not in captured.err and ".hidden" not in captured.err and "_SUCCESS" not in captured.err
    assert "rows without a date 240" in captured.out
    with open(tmp_path / "a" / "result.json") as fh:
        res = json.load(fh)
    assert any(v["check"] == "input" and v["verdict"] == "fail" and "240 impression_log row(s) have a null dt or one that is not a date, or lie in a file outside"
               in v["message"] for v in res["verdicts"])
    # the dated rows read as the original's: same counts per day once the rows without a date are allowed
    assert main([*argv, "--out", str(tmp_path / "b"), "--max-quarantine-share", "0.7"]) == 0
    assert main(["validate", "--logs", f"{original}/logs", "--engine", engine, "--no-great-expectations",
                 "--out", str(tmp_path / "ref")]) == 0
    ref = _log_counts(tmp_path / "ref")
    got = _log_counts(tmp_path / "b")
    assert got["by_dt"] == ref["by_dt"] and got["rows_in"] == ref["rows_in"] == 160


def test_every_parquet_file_under_logs_is_read_or_counted_on_spark(spark, original, tmp_path, capsys):
    """The same tree on Spark: the same days, counts and names (the files are found before any engine reads)."""
    test_every_parquet_file_under_logs_is_read_or_counted(original, tmp_path, capsys, engine="spark")


def test_notebook_frames_on_spark_read_like_duckdb(spark, original):
    """A notebook's inputs on the Spark engine read as DuckDB reads them: a pandas frame (what engine="spark",
    SPARK_REMOTE or spark-submit send to Spark: an AttributeError before) whose context is a column of dicts (a
    struct to pyarrow and to Spark Connect's createDataFrame: Spark's analysis error before, exit 1, while DuckDB
    read it); a DataFrame column that cannot become the contract's is exit 2 naming it, as for a Parquet file
    (exit 1 before). The notebook's session keeps its own settings: its time zone, overwrite mode and Parquet
    reading were changed for good by the call before (nanosecond timestamps then read as numbers)."""
    import scavenger
    from scavenger.errors import UsageError
    from scavenger.session import DEFAULT_SQL_CONF

    logs = pq.read_table(f"{original}/logs").to_pandas()
    # dicts with a null value (a key some rows lack): check a sees feature g alike on both engines
    logs["context"] = [{"f": "v", "g": c} if i % 3 else {"f": "v", "g": None} for i, c in
                       enumerate(logs["context_id"])]
    keys = ("spark.sql.session.timeZone", "spark.sql.sources.partitionOverwriteMode",
            "spark.sql.legacy.parquet.nanosAsLong", "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold")
    kept = {k: spark.conf.get(k, None) for k in keys}          # the suite's session: put back at the end
    assert kept[keys[-1]] == DEFAULT_SQL_CONF[keys[-1]]        # applied beside the suite's own conf
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    spark.conf.unset(keys[-1])
    before = {k: spark.conf.get(k, None) for k in keys}
    kw = dict(estimators=["pi", "ips", "scavenging"], policies=["det", "sto"], gate="report")
    try:
        on_spark = scavenger.evaluate(logs, f"{original}/decisions", engine="spark", **kw)
        assert {k: spark.conf.get(k, None) for k in keys} == before
    finally:
        for k, v in kept.items():
            spark.conf.set(k, v) if v is not None else spark.conf.unset(k)
    duck = scavenger.evaluate(logs, f"{original}/decisions", engine="duckdb", **kw)
    assert on_spark.engine["name"] == "spark"
    order = ["policy_id", "estimator", "interval_kind"]
    _same(duck.pandas.sort_values(order), on_spark.pandas.sort_values(order))
    a = [sorted((v["scope"], v["verdict"], v["message"]) for v in r.verdicts if v["check"].startswith("a."))
         for r in (duck, on_spark)]
    assert a[0] == a[1] and any("feature=g" in scope for scope, _, _ in a[0])
    bad = spark.createDataFrame(pa.Table.from_pandas(logs.assign(slots=logs["slots"].astype(str)),
                                                     preserve_index=False))
    with pytest.raises(UsageError, match="column slots has type string"):
        scavenger.adc(bad, gate="off")
    with pytest.raises(UsageError, match="field 'n' holds double"):
        scavenger.adc(logs.assign(context=[{"n": 0.5}] * len(logs)), engine="duckdb", gate="off")
