"""Hostile arguments and settings (hunt A): every one is exit 2 with one line naming the flag, path or variable,
checked before an engine starts; none is exit 1 or a traceback. In-process through ``scavenger.cli.main`` on
tiny DuckDB data (test_hostile.build)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from scavenger.cli import main
from test_checks_hostile import build

ENV_VARS = ("SCAVENGER_DUCKDB_MEMORY", "SCAVENGER_DUCKDB_THREADS", "SCAVENGER_DUCKDB_TEMP",
            "SCAVENGER_WINDOW_WORKERS")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile_args")
    build(root, days=2, per_day=60, K=3, ads=3)
    return root


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def _refused(capsys, argv, *words) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    for w in words:
        assert w in err, err
    return err


def _adc(data, out, *extra):
    return ["adc", "--engine", "duckdb", "--logs", f"{data}/logs", "--out", str(out), "--gate", "report", *extra]


def _evaluate(data, out, *extra):
    return ["evaluate", "--engine", "duckdb", "--logs", f"{data}/logs", "--decisions", f"{data}/decisions",
            "--out", str(out), "--gate", "report", *extra]


# -- 1. prepare goes through the job boundary --------------------------------------------------------------------

def test_unreadable_input_in_prepare_is_exit_2_naming_the_path(data, tmp_path, capsys, monkeypatch):
    from scavenger.io import fs

    bad = f"{data}/logs/dt=2026-01-02"

    def denied(uri):
        raise PermissionError(13, "Permission denied", bad)

    monkeypatch.setattr(fs, "data_files", denied)
    out = tmp_path / "out"
    out.mkdir()                                   # an existing --out gets the refusal in result.json
    _refused(capsys, _adc(data, out), bad, "Permission denied")
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "bad_arguments" and result["exit_code"] == 2 and bad in result["message"]
    assert not (out / "adc").exists()


def test_unexpected_error_in_prepare_is_classified_not_a_traceback(data, tmp_path, capsys, monkeypatch):
    from scavenger.cli import adc_command as adc

    monkeypatch.setattr(adc, "prepare", lambda args, ctx: (_ for _ in ()).throw(RuntimeError("boom")))
    code = main(_adc(data, tmp_path / "o"))
    err = capsys.readouterr().err
    assert code == 1 and "internal error: RuntimeError: boom" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--out", "--logs", "--run-id"])
def test_flag_with_bytes_that_are_not_utf8_is_exit_2_naming_it(data, tmp_path, capsys, flag):
    argv = _adc(data, tmp_path / "o")
    bad = os.fsdecode(str(tmp_path).encode() + b"/\xff\xfe") if flag != "--run-id" else os.fsdecode(b"\xff\xfe")
    if flag == "--run-id":
        argv += ["--run-id", bad]
    else:
        argv[argv.index(flag) + 1] = bad
    _refused(capsys, argv, flag, "not UTF-8")


@pytest.mark.parametrize("logs", ["/proc", "/proc/self"])
def test_logs_on_a_kernel_filesystem_is_exit_2(tmp_path, capsys, logs):
    _refused(capsys, ["adc", "--engine", "duckdb", "--logs", logs, "--out", str(tmp_path / "o")], "--logs",
             "kernel filesystem")


def test_partition_linked_into_proc_is_exit_2_naming_it(data, tmp_path, capsys):
    import shutil

    logs = tmp_path / "logs"
    shutil.copytree(f"{data}/logs", logs)
    os.symlink("/proc/self", logs / "dt=2026-01-03")
    _refused(capsys, ["adc", "--engine", "duckdb", "--logs", str(logs), "--out", str(tmp_path / "o")],
             str(logs / "dt=2026-01-03"), "kernel filesystem")


# -- 2. empty paths ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["adc", "--logs", "{data}/logs", "--out", ""], "--out"),
    (["evaluate", "--logs", "{data}/logs", "--decisions", "", "--out", "{tmp}/o"], "--decisions"),
    (["adc", "--logs", "", "--out", "{tmp}/o"], "--logs"),
    (["adc", "--logs", "{data}/logs", "--stats-dir", "", "--out", "{tmp}/o"], "--stats-dir"),
    (["generate", "--out", ""], "--out"),
    (["report", "--out", "", "--estimates", "{tmp}"], "--out"),
    (["demo", "--out", ""], "--out"),
    (["simulate", "--preset", "fig1", "--out", ""], "--out"),
])
def test_empty_path_flag_is_exit_2(data, tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    argv = [a.format(data=data, tmp=tmp_path) for a in argv]
    _refused(capsys, argv, flag, "is empty")
    assert os.listdir(tmp_path) == []             # nothing written in the working directory


# -- 3. one --out check for every command -----------------------------------------------------------------------

COMMANDS = {
    "generate": ["generate", "--engine", "duckdb", "--days", "1", "--events-per-day", "100"],
    "simulate": ["simulate", "--preset", "fig1", "--backend", "local"],
    "demo": ["demo", "--engine", "duckdb"],
    "report": ["report", "--estimates", "{tmp}"],
    "ingest-obd": ["ingest-obd", "--obd-dir", "{tmp}"],
    "obd-target": ["obd-target", "--obd-dir", "{tmp}"],
    "train": ["train", "--logs", "{data}/logs", "--from", "2026-01-01", "--to", "2026-01-01", "--score-from",
              "2026-01-02", "--score-to", "2026-01-02"],
    "adc": ["adc", "--logs", "{data}/logs"],
    "validate": ["validate", "--logs", "{data}/logs"],
    "evaluate": ["evaluate", "--logs", "{data}/logs", "--decisions", "{data}/decisions"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("where", ["file", "/proc/x", "/sys/x"])
def test_out_that_cannot_be_written_is_exit_2_for_every_command(data, tmp_path, capsys, command, where):
    if where == "file":
        out = tmp_path / "a_file"
        out.write_text("x")
        words = ("--out", "not a directory")
    else:
        out, words = where, ("--out", "kernel filesystem")
    argv = [a.format(data=data, tmp=tmp_path) for a in COMMANDS[command]] + ["--out", str(out)]
    _refused(capsys, argv, *words)


def test_out_check_creates_nothing(data, tmp_path, capsys):
    from scavenger.cli.shared_flags import check_out

    check_out(str(tmp_path / "a" / "b"))
    assert os.listdir(tmp_path) == []


# -- 4. --out and --stats-dir outside the inputs -----------------------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["--out", "{data}/logs"], ("--out", "same directory as --logs")),
    (["--out", "{data}/logs/dt=2026-01-01/out"], ("--out", "is inside --logs")),
    (["--out", "{tmp}/o", "--stats-dir", "{data}/logs"], ("--stats-dir", "--logs")),
])
def test_output_inside_an_input_is_exit_2(data, tmp_path, capsys, argv, words):
    before = sorted(p.name for p in Path(data, "logs").rglob("*"))
    argv = ["adc", "--engine", "duckdb", "--logs", f"{data}/logs"] + [a.format(data=data, tmp=tmp_path) for a in argv]
    _refused(capsys, argv, *words)
    assert sorted(p.name for p in Path(data, "logs").rglob("*")) == before


def test_out_inside_decisions_is_exit_2_and_logs_inside_out_is_fine(data, tmp_path, capsys):
    _refused(capsys, _evaluate(data, f"{data}/decisions/x"), "--out", "--decisions")
    import shutil

    out = tmp_path / "out"
    shutil.copytree(f"{data}/logs", out / "logs")
    assert main(["validate", "--engine", "duckdb", "--logs", str(out / "logs"), "--out", str(out),
                 "--no-gate", "--no-great-expectations"]) == 0
    assert (out / "validation").exists()


# -- 5. the DuckDB settings of the environment ------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    *[("SCAVENGER_DUCKDB_MEMORY", v) for v in ("abc", "0", "nan", "1PB", "-1GB", "99999999999999999999GB", "'",
                                               "ü", "1GB; DROP", "1KB")],
    *[("SCAVENGER_DUCKDB_THREADS", v) for v in ("abc", "0", "-1", "1.5", "100000", "99999999999999999999")],
    *[("SCAVENGER_WINDOW_WORKERS", v) for v in ("many", "0", "-2", "2.5", "100000")],
])
def test_bad_duckdb_setting_is_exit_2_naming_the_variable(data, tmp_path, capsys, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    _refused(capsys, _adc(data, tmp_path / "o"), name)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("where", ["file", "/proc/x"])
def test_spill_directory_that_cannot_be_written_is_exit_2(data, tmp_path, capsys, monkeypatch, where):
    path = tmp_path / "a_file" if where == "file" else where
    if where == "file":
        path.write_text("x")
    monkeypatch.setenv("SCAVENGER_DUCKDB_TEMP", str(path))
    _refused(capsys, _adc(data, tmp_path / "o"), "SCAVENGER_DUCKDB_TEMP")


def test_good_duckdb_settings_are_used_and_the_spill_directory_kept(data, tmp_path, capsys, monkeypatch):
    spill = tmp_path / "spill"
    spill.mkdir()
    (spill / "mine.txt").write_text("the user's file")
    monkeypatch.setenv("SCAVENGER_DUCKDB_MEMORY", "512MB")
    monkeypatch.setenv("SCAVENGER_DUCKDB_THREADS", "1")
    monkeypatch.setenv("SCAVENGER_DUCKDB_TEMP", str(spill))
    assert main(["validate", "--engine", "duckdb", "--logs", f"{data}/logs", "--out", str(tmp_path / "o"),
                 "--no-gate", "--no-great-expectations"]) == 0
    settings = json.loads((tmp_path / "o" / "result.json").read_text())["engine"]
    assert settings["memory_limit"] == "512MB" and settings["threads"] == 1
    assert settings["spill_directory"].startswith(str(spill) + os.sep)
    assert (spill / "mine.txt").read_text() == "the user's file"      # only the run's own directory is removed
    assert os.listdir(spill) == ["mine.txt"]


def test_duckdb_settings_are_not_checked_for_spark(monkeypatch):
    from scavenger.engines import check_environment

    monkeypatch.setenv("SCAVENGER_DUCKDB_THREADS", "abc")
    assert check_environment("spark") == {}


def test_memory_setting_bounds_are_the_16MB_the_message_names():
    from scavenger.engines.duck_settings import check_memory_setting
    from scavenger.errors import UsageError

    assert check_memory_setting("16MB") == "16MB"           # the documented lower bound, as DuckDB reads MB (10^6)
    with pytest.raises(UsageError, match="at least 16MB"):
        check_memory_setting("15MB")


# -- 6. generate -------------------------------------------------------------------------------------------------

GEN = ["generate", "--engine", "duckdb", "--days", "1", "--events-per-day", "100"]


@pytest.mark.parametrize("extra, words", [
    (["--days", "100000000"], ("--days", "9999-12-31")),
    (["--start-date", "9999-12-31", "--days", "2"], ("--days 2", "9999-12-31")),
    (["--seed", "999999999999999999999999"], ("--seed", "too large")),
    (["--seed", "-1"], ("--seed",)),
    (["--seed", "1.5"], ("--seed",)),
    (["--contexts", "100000000"], ("--contexts", "lower --contexts")),
])
def test_generate_flag_is_exit_2_before_out_is_touched(tmp_path, capsys, extra, words):
    err = _refused(capsys, GEN + ["--out", str(tmp_path / "g")] + extra, *words)
    assert "--batch-days" not in err
    assert not (tmp_path / "g").exists()


def test_generate_seed_is_exact(tmp_path, capsys):
    seed = "12345678901234567890"                 # through float it would be ...67168
    assert main(GEN + ["--out", str(tmp_path / "g"), "--seed", seed]) == 0
    result = json.loads((tmp_path / "g" / "result.json").read_text())
    assert result["inputs"]["config"]["seed"] == int(seed)


@pytest.mark.parametrize("layout", [[], ["--layout", "slotted", "--slot-sizes", "3"]])
def test_generate_one_position(tmp_path, layout):
    """K = 1, ranked or slotted: the draws of a one-position slate are arrays of one (a BinderException, exit 1,
    before: the statement wrote them as numbers and then indexed them); the logs evaluate."""
    import pyarrow.parquet as pq

    assert main(GEN + ["--out", str(tmp_path / "g"), "--positions", "1", *layout]) == 0
    slots = pq.read_table(tmp_path / "g" / "logs").column("slots").to_pylist()
    assert len(slots) == 100 and {s[0]["position"] for s in slots} == {1} and {len(s) for s in slots} == {1}
    assert main(["evaluate", "--engine", "duckdb", "--logs", str(tmp_path / "g" / "logs"), "--decisions",
                 str(tmp_path / "g" / "decisions"), "--gate", "report", "--out", str(tmp_path / "e")]) == 0


def test_demo_days_that_do_not_fit_are_exit_2(tmp_path, capsys):
    _refused(capsys, ["demo", "--engine", "duckdb", "--out", str(tmp_path / "d"), "--days", "99999999"], "--days")
    _refused(capsys, ["demo", "--engine", "duckdb", "--out", str(tmp_path / "d"), "--seed", "-1"], "--seed")
    assert not (tmp_path / "d").exists()


# -- 7. evaluate -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, words", [
    (["--n-ads", "99999999999999999999999999999"], ("--n-ads",)),
    (["--n-ads", "0"], ("--n-ads",)),
    (["--n-ads", "-3"], ("--n-ads",)),
    (["--prior-mean", "nan"], ("--prior-mean",)),
    (["--prior-mean", "inf"], ("--prior-mean",)),
    (["--reorder", "random:1", "--reorder", "random:1"], ("--reorder random:1", "twice")),
    (["--reorder", "random", "--reorder", "random:0"], ("same policy",)),
    (["--reorder", "ctr:2025-12-01:2025-12-02", "--reorder", "ctr:2025-12-01:2025-12-02"], ("twice",)),
    (["--reorder", "ctr:2026-01-02:2026-01-01", "--from", "2026-01-03"], ("ctr:2026-01-02:2026-01-01",
                                                                          "ends before it starts")),
])
def test_evaluate_flag_is_exit_2(data, tmp_path, capsys, extra, words):
    _refused(capsys, _evaluate(data, tmp_path / "o") + extra, *words)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("extra", [["--dcg-base", "nan"], ["--dcg-base", "inf"], ["--smoothing", "nan"],
                                   ["--smoothing", "inf"]])
def test_adc_number_that_would_write_nan_is_exit_2(data, tmp_path, capsys, extra):
    _refused(capsys, _adc(data, tmp_path / "o", *extra), extra[0], "finite")
    assert not (tmp_path / "o").exists()


def test_dcg_of_the_first_position_is_one_for_a_base_near_one():
    from scavenger.estimators.attention_decay import dcg

    assert dcg([1, 2], 1.0000000000000002)[0] == 1.0


SCORE_FILES = {
    "not_utf8.csv": (b"ad_id,score\n\xff\xfe,1\n", "not UTF-8"),
    "empty.csv": (b"ad_id,score\n", "no rows"),
    "blank.csv": (b"", "empty"),
    "nan.csv": (b"ad_id,score\na1_0,nan\na1_1,\n", "no score is a number"),
    "inf.csv": (b"ad_id,score\na1_0,inf\na1_1,1\n", "infinite"),
    "neginf.csv": (b"ad_id,score\na1_0,-inf\na1_1,1\n", "infinite"),
}


@pytest.mark.parametrize("name", sorted(SCORE_FILES))
def test_score_table_that_cannot_be_used_is_exit_2_naming_the_file(data, tmp_path, capsys, name):
    content, words = SCORE_FILES[name]
    path = tmp_path / name
    path.write_bytes(content)
    _refused(capsys, _evaluate(data, tmp_path / "o", "--reorder", f"scores:{path}"), str(path), words)


def test_score_directory_of_files_that_are_not_parquet_is_exit_2(data, tmp_path, capsys):
    d = tmp_path / "scores"
    d.mkdir()
    (d / "part-0.parquet").write_text("ad_id,score\na,1\n")
    _refused(capsys, _evaluate(data, tmp_path / "o", "--reorder", f"scores:{d}"), str(d), "Parquet")


def test_two_score_tables_are_two_policies(data, tmp_path, capsys):
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
        pd.DataFrame({"ad_id": ["a1_0", "a1_1", "a1_2"], "score": [3.0, 2.0, 1.0]}).to_csv(
            tmp_path / sub / "s.csv", index=False)
    out = tmp_path / "o"
    code = main(["evaluate", "--engine", "duckdb", "--logs", f"{data}/logs", "--out", str(out), "--gate", "report",
                 "--estimators", "reorder", "--reorder", f"scores:{tmp_path}/x/s.csv",
                 "--reorder", f"scores:{tmp_path}/y/s.csv"])
    assert code in (0, 3), capsys.readouterr().err
    est = pd.read_parquet(out / "estimates")
    assert sorted(est["policy_id"].unique()) == ["reorder_scores_s", "reorder_scores_s_2"]
    n = est.groupby("policy_id")["n_events"].max()
    assert n["reorder_scores_s"] == n["reorder_scores_s_2"] == 120     # not doubled under one id


# -- 8. simulate -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, flag", [
    (["--N", "inf"], "--N"), (["--N", "1e30"], "--N"), (["--N", "nan"], "--N"), (["--seed", "-1"], "--seed"),
    (["--pbar", "nan"], "--pbar"),
])
def test_simulate_flag_is_exit_2(tmp_path, capsys, extra, flag):
    _refused(capsys, ["simulate", "--preset", "fig1", "--backend", "local", "--out", str(tmp_path / "s")] + extra,
             flag)
    assert not (tmp_path / "s").exists()


# -- 9. a stored ADC table that cannot serve ---------------------------------------------------------------------

@pytest.mark.parametrize("rows, words", [
    # (estimators/adc_family.read_adc_table may refuse these first, in its own words: both say "every C_k must be")
    ([(1, 1.0), (2, float("nan")), (3, 0.5)], ("every C_k must be",)),
    ([(1, 1.0), (2, -3.0), (3, 0.0)], ("every C_k must be",)),
    ([(1, 1.0), (3, 0.5)], ("positions must be 1..n",)),
    ([(1, 1.0)], ("gives 1 position(s) but the logs show 3",)),
])
def test_adc_table_that_cannot_serve_is_exit_2_naming_it(data, tmp_path, capsys, rows, words):
    path = tmp_path / "adc.csv"
    pd.DataFrame([{"position": p, "method": "heuristic", "coefficient": c} for p, c in rows]).to_csv(path,
                                                                                                      index=False)
    _refused(capsys, _evaluate(data, tmp_path / "o", "--adc", str(path), "--estimators", "factored"), str(path),
             *words)


def test_a_reader_that_goes_away_is_no_internal_error(tmp_path):
    """`scavenger generate ... 2>&1 | head -1`: the reader closes the pipe after one line. The job finishes, writes
    its outputs and exits 0 (before: BrokenPipeError on the next progress line, exit 1, an internal error)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "scavenger", "generate", "--out", str(tmp_path / "gen"), "--events",
                          "2000", "--days", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    first = p.stdout.readline()
    p.stdout.close()
    assert p.wait(timeout=300) == 0 and first.startswith(b"[scavenger]")
    assert (tmp_path / "gen" / "_manifest.json").exists()


@pytest.mark.parametrize("flag", ["--policies", "--estimators"])
def test_a_list_of_nothing_is_exit_2(tmp_path, capsys, flag):
    """`--policies ,` and `--estimators ,` name nothing: exit 2 saying so (before: read as every policy and as the
    default set, exit 0)."""
    build(tmp_path / "d", per_day=20)
    code = main(["evaluate", "--logs", str(tmp_path / "d" / "logs"), "--decisions", str(tmp_path / "d" / "decisions"),
                 "--engine", "duckdb", "--out", str(tmp_path / "o"), flag, " , "])
    assert code == 2 and "names no" in capsys.readouterr().err


def test_a_malformed_flag_is_one_line_in_argparse_words(capsys):
    """A flag argparse refuses is exit 2 with one line, ``scavenger evaluate: error: argument --gate: ...`` (the
    command's name once; before: ``scavenger: error: scavenger evaluate: argument ...``)."""
    err = _refused(capsys, ["evaluate", "--gate", "bogus", "--logs", "x", "--out", "y"],
                   "scavenger evaluate: error: argument --gate: invalid choice: 'bogus'")
    assert err.count("scavenger") == 1 and len(err.strip().splitlines()) == 1, err
    err = _refused(capsys, ["bogus"], "scavenger: error: argument COMMAND: invalid choice: 'bogus'")
    assert len(err.strip().splitlines()) == 1, err
