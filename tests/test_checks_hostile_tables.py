"""Hostile input tables for report, ingest-obd, obd-target and evaluate --adc: each refused with exit 2 (not what
the flag expects) or 3 (data that fail a check) and one line naming the file and what to fix; never exit 1."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from scavenger.cli import main

OBD = Path("/work/shared/data/obd")
EST_COLUMNS = dict(policy_id=["p"], estimator=["pi"], value=[0.1], ci_low=[0.0], ci_high=[0.2],
                   interval_kind=["clt"], identified=[True], reason=[None])


def _evaluate_dir(root: Path, K: int = 4) -> Path:
    """A hand-made evaluate --out: estimates/ and a result.json (no manifest: read as it is)."""
    (root / "estimates").mkdir(parents=True)
    pd.DataFrame(EST_COLUMNS).to_parquet(root / "estimates" / "part-0.parquet")
    (root / "result.json").write_text(json.dumps({"job": "evaluate", "run_id": "R", "status": "ok",
                                                  "counts": {"K": K}}))
    return root


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_report_refuses_a_table_of_another_kind(tmp_path, capsys):
    other = tmp_path / "logs"
    other.mkdir()
    pd.DataFrame({"event_id": ["e"], "x": [1]}).to_parquet(other / "part-0.parquet")
    assert main(["report", "--out", str(tmp_path / "r1"), "--estimates", str(other)]) == 2
    err = _err(capsys)
    assert "--estimates" in err and "missing column(s) policy_id" in err and "internal error" not in err
    ev = _evaluate_dir(tmp_path / "ev")
    assert main(["report", "--out", str(tmp_path / "r2"), "--adc", str(ev / "estimates")]) == 2
    err = _err(capsys)
    assert "--adc" in err and "missing column(s) position, method, coefficient" in err
    (ev / "estimates" / "part-0.parquet").unlink()          # an evaluate output whose table file is gone
    assert main(["report", "--out", str(tmp_path / "r3"), "--estimates", str(ev)]) == 2
    assert "holds no table" in _err(capsys)


@pytest.mark.parametrize("name,body,says", [
    ("_manifest.json", b"\xff\xfe", "_manifest.json is malformed: not UTF-8"),
    ("_manifest.json", b"[1,2]", "_manifest.json is malformed: a JSON list"),
    ("_manifest.json", b'{"tables":5,"complete":true}', "'tables' is a JSON int"),
    ("result.json", b"garbage", "result.json is malformed: not JSON"),
])
def test_report_malformed_manifest_or_result_is_not_a_complete_run(tmp_path, capsys, name, body, says):
    ev = _evaluate_dir(tmp_path / "ev")
    if name == "result.json":
        (ev / "_manifest.json").write_text(json.dumps({"run_id": "R", "complete": True, "tables": []}))
    (ev / name).write_bytes(body)
    assert main(["report", "--out", str(tmp_path / "r"), "--estimates", str(ev)]) == 3
    err = _err(capsys)
    assert "not one complete run" in err and says in err


def test_report_ground_truth_not_json_or_of_another_k(tmp_path, capsys):
    ev = _evaluate_dir(tmp_path / "ev", K=4)
    binary = tmp_path / "gt.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["report", "--out", str(tmp_path / "r1"), "--estimates", str(ev), "--ground-truth", str(binary)]) == 2
    assert "--ground-truth" in _err(capsys)
    gt = tmp_path / "gt3.json"
    gt.write_text(json.dumps({"n_positions": 3, "adc": [1.0, 0.6, 0.5]}))
    assert main(["report", "--out", str(tmp_path / "r2"), "--estimates", str(ev), "--ground-truth", str(gt)]) == 2
    err = _err(capsys)
    assert "K=3" in err and "K=4" in err


def test_report_out_is_not_an_input_directory(tmp_path, capsys):
    """--out equal to or inside an input is refused, and the refusal leaves the evaluate run's record as it was."""
    import json

    ev = _evaluate_dir(tmp_path / "ev")
    record = (ev / "result.json").read_text()
    assert json.loads(record)["job"] == "evaluate"
    for out in (ev, ev / "sub"):
        assert main(["report", "--out", str(out), "--estimates", str(ev)]) == 2
        assert "input directory" in _err(capsys)
    assert main(["report", "--out", str(ev), "--estimates", str(ev / "estimates")]) == 2
    assert not (ev / "report.html").exists()
    assert (ev / "result.json").read_text() == record


def test_report_finds_nothing_under_root_or_history(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "--out", str(tmp_path / "r1"), "--root", str(empty), "--dt", "2026-01-01"]) == 2
    assert "not a daily output root" in _err(capsys)
    (empty / "evaluate" / "ds" / "dt=2026-01-02").mkdir(parents=True)
    assert main(["report", "--out", str(tmp_path / "r2"), "--root", str(empty), "--dt", "2026-01-01"]) == 3
    assert "no output of dt=2026-01-01" in _err(capsys)
    assert main(["report", "--out", str(tmp_path / "r3"), "--history", str(tmp_path / "r1")]) == 2
    assert "--history: no daily estimates" in _err(capsys)


# ---------------------------------------------------------------------------------------------- OBD
def _obd(tmp_path: Path, name: str, policy: str = "random", rows: int = 40) -> tuple[Path, Path]:
    """A copy of the first rows of the OBD sample's all campaign (random and bts), and the file to spoil."""
    if not OBD.is_dir():
        pytest.skip("no OBD sample")
    root = tmp_path / name
    for pol in ("random", "bts"):
        (root / pol / "all").mkdir(parents=True)
        with open(OBD / pol / "all" / "all.csv", "rb") as src:
            lines = [src.readline() for _ in range(rows + 1)]
        (root / pol / "all" / "all.csv").write_bytes(b"".join(lines))
    return root, root / policy / "all" / "all.csv"


def _spoil(path: Path, how: str) -> None:
    lines = path.read_bytes().split(b"\n")
    if how == "empty":
        path.write_bytes(b"")
    elif how == "header_only":
        path.write_bytes(lines[0] + b"\n")
    elif how == "short_row":
        lines[2] = b",".join(lines[2].split(b",")[:6])
        path.write_bytes(b"\n".join(lines))
    elif how == "four_columns":
        path.write_bytes(b"\n".join(b",".join(ln.split(b",")[:4]) for ln in lines))
    elif how == "bytes_ff":
        lines[3] = lines[3][:40] + b"\xff\xfe" + lines[3][42:]
        path.write_bytes(b"\n".join(lines))
    elif how == "bad_timestamp":
        f = lines[2].split(b",")
        f[1] = b"notatime"
        lines[2] = b",".join(f)
        path.write_bytes(b"\n".join(lines))
    elif how == "bad_propensity":
        f = lines[2].split(b",")
        f[5] = b"abc"
        lines[2] = b",".join(f)
        path.write_bytes(b"\n".join(lines))
    elif how == "directory":
        path.unlink()
        path.mkdir()


HOSTILE = [("empty", 2, "is empty"), ("four_columns", 2, "missing column(s) click"),
           ("directory", 2, "is a directory"), ("short_row", 3, "line 3"), ("bytes_ff", 3, "line 4: invalid encoding"),
           ("bad_timestamp", 3, "notatime"), ("bad_propensity", 3, "'abc'"), ("header_only", 3, "holds no rows")]


@pytest.mark.parametrize("how,code,says", HOSTILE)
def test_ingest_obd_hostile_csv(tmp_path, capsys, how, code, says):
    root, victim = _obd(tmp_path, how)
    _spoil(victim, how)
    out = tmp_path / "out"
    assert main(["ingest-obd", "--engine", "duckdb", "--obd-dir", str(root), "--out", str(out),
                 "--policies", "random", "--campaigns", "all"]) == code
    err = _err(capsys)
    assert says in err and "all.csv" in err and "--logs" not in err and "internal error" not in err
    assert not (out / "logs").exists()


def test_ingest_obd_repeated_list_values_ingest_each_file_once(tmp_path):
    root, _ = _obd(tmp_path, "ok")
    out = tmp_path / "out"
    assert main(["ingest-obd", "--engine", "duckdb", "--obd-dir", str(root), "--out", str(out),
                 "--policies", "random,random", "--campaigns", "all,all"]) == 0
    counts = json.loads((out / "result.json").read_text())["counts"]
    assert counts["rows"] == 40 and counts["rows_read"] == 40


@pytest.mark.parametrize("how,code,says", HOSTILE)
def test_obd_target_hostile_bts_csv(tmp_path, capsys, how, code, says):
    root, victim = _obd(tmp_path, how, policy="bts")
    _spoil(victim, how)
    assert main(["obd-target", "--obd-dir", str(root), "--out", str(tmp_path / "out"), "--campaigns", "all"]) == code
    err = _err(capsys)
    assert says in err and "bts" in err and "internal error" not in err


def test_obd_target_repeated_campaigns_once_and_zero_propensity_is_a_data_check(tmp_path, capsys):
    root, bts = _obd(tmp_path, "ok", policy="bts")
    out = tmp_path / "out"
    assert main(["obd-target", "--obd-dir", str(root), "--out", str(out), "--campaigns", "all,all"]) == 0
    assert json.loads((out / "result.json").read_text())["counts"]["decision_rows"] == 40
    lines = bts.read_bytes().split(b"\n")
    f = lines[2].split(b",")
    f[5] = b"0"
    lines[2] = b",".join(f)
    bts.write_bytes(b"\n".join(lines))
    assert main(["obd-target", "--obd-dir", str(root), "--out", str(tmp_path / "o2"), "--campaigns", "all"]) == 3
    assert "propensity_score must be a finite number > 0" in _err(capsys)


# ---------------------------------------------------------------------------------------------- --adc tables
@pytest.mark.parametrize("rows,says", [
    ("1,heuristic,1\n2,heuristic,abc\n", "column coefficient holds 'abc'"),
    ("1,heuristic,1\nx,heuristic,0.5\n", "column position holds 'x'"),
    ("1,heuristic,1\n2.5,heuristic,0.5\n", "column position holds 2.5"),
    ("1,heuristic,2\n2,heuristic,0.5\n", "C_1 = 1"),
    # NaN, negative, zero C_1, duplicate positions: refused by evaluate's own check of the method's rows
    ("1,heuristic,1\n2,heuristic,nan\n", "missing, not finite or not positive"),
    ("1,heuristic,1\n2,heuristic,-0.5\n", "not positive"),
    ("1,heuristic,0\n2,heuristic,0.5\n", "not positive"),
    ("1,heuristic,1\n2,heuristic,0.5\n2,heuristic,0.4\n", "positions must be 1..n"),
])
def test_evaluate_adc_table_bad_values_exit_2(tmp_path, capsys, rows, says):
    table = tmp_path / "adc.csv"
    table.write_text("position,method,coefficient\n" + rows)
    logs = tmp_path / "logs"
    logs.mkdir()
    assert main(["evaluate", "--engine", "duckdb", "--logs", str(logs), "--decisions", str(logs), "--out",
                 str(tmp_path / "ev"), "--estimators", "factored", "--adc", str(table), "--adc-method",
                 "heuristic"]) == 2
    err = _err(capsys)
    assert says in err and str(table) in err


def test_adc_vector_reads_text_values_as_missing():
    from scavenger.estimators.attention_decay import adc_vector

    table = pd.DataFrame({"method": ["m"] * 3, "position": ["1", "2", "x"], "coefficient": ["1", "abc", "0.5"]})
    C = adc_vector(table, "m", 3)
    assert C[0] == 1.0 and pd.isna(C[1]) and pd.isna(C[2])
