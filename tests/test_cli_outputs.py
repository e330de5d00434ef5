"""Outputs and mistakes (issue 60): an --out holding another job's output, or another window's, is refused (exit 2,
naming --overwrite) while a re-run of the same job and window replaces its own silently (Airflow's re-run of a day);
result.json says which job and window wrote it; a window outside the logs is exit 2 naming the days they hold;
unknown commands, flags, choices, --checks letters and --policies ids get "did you mean". DuckDB, small logs."""
from __future__ import annotations

import json

import pytest

from scavenger import cli


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = tmp_path_factory.mktemp("cli_outputs") / "gen"
    cfg = GeneratorConfig(layout="slotted", logging="uniform", n_positions=2, slot_sizes=[2, 3], n_contexts=3,
                          days=3, events_per_day=400, seed=4)
    generate("duckdb", cfg, str(out))
    return out


def _validate(gen, out, *extra):
    return cli.main(["validate", "--logs", str(gen / "logs"), "--checks", "b", "--no-great-expectations",
                     "--out", str(out), *extra])


def test_result_json_says_which_job_and_window(gen, tmp_path):
    assert _validate(gen, tmp_path / "v", "--from", "2026-01-02", "--to", "2026-01-03") == 0
    record = json.loads((tmp_path / "v" / "result.json").read_text())
    assert record["job"] == "validate" and record["window"] == {"--from": "2026-01-02", "--to": "2026-01-03"}


def test_another_jobs_or_windows_output_is_refused_without_overwrite(gen, tmp_path, capsys):
    out = tmp_path / "shared"
    assert _validate(gen, out, "--from", "2026-01-01", "--to", "2026-01-02") == 0
    first = json.loads((out / "result.json").read_text())
    # the same job and window again (an Airflow re-run of the day): replaced silently
    assert _validate(gen, out, "--from", "2026-01-01", "--to", "2026-01-02") == 0
    assert json.loads((out / "result.json").read_text())["run_id"] != first["run_id"]
    capsys.readouterr()
    # another window: refused, nothing touched
    before = (out / "result.json").read_text()
    assert _validate(gen, out, "--from", "2026-01-02", "--to", "2026-01-03") == 2
    err = capsys.readouterr().err
    assert "holds the output of `scavenger validate` (window --from 2026-01-01 --to 2026-01-02)" in err
    assert "--overwrite" in err and (out / "result.json").read_text() == before
    # another job: refused too
    assert cli.main(["evaluate", "--logs", str(gen / "logs"), "--decisions", str(gen / "decisions"),
                     "--estimators", "pi", "--out", str(out)]) == 2
    assert "holds the output of `scavenger validate`" in capsys.readouterr().err
    assert (out / "result.json").read_text() == before
    # --overwrite: replaced, and result.json now says so
    assert cli.main(["evaluate", "--logs", str(gen / "logs"), "--decisions", str(gen / "decisions"),
                     "--estimators", "pi", "--out", str(out), "--overwrite"]) == 0
    record = json.loads((out / "result.json").read_text())
    assert record["job"] == "evaluate" and record["window"] == {"--from": None, "--to": None}


def test_an_older_result_json_without_window_reads_its_inputs(gen, tmp_path):
    out = tmp_path / "old"
    assert _validate(gen, out, "--from", "2026-01-01", "--to", "2026-01-01") == 0
    record = json.loads((out / "result.json").read_text())
    del record["window"]
    (out / "result.json").write_text(json.dumps(record))
    assert _validate(gen, out, "--from", "2026-01-01", "--to", "2026-01-01") == 0
    assert _validate(gen, out, "--from", "2026-01-03", "--to", "2026-01-03") == 2


def test_a_window_outside_the_logs_is_exit_2_naming_the_days_they_hold(gen, tmp_path, capsys):
    code = cli.main(["evaluate", "--logs", str(gen / "logs"), "--decisions", str(gen / "decisions"),
                     "--from", "2025-06-01", "--to", "2025-06-30", "--out", str(tmp_path / "e")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no logs in the window 2025-06-01..2025-06-30; they hold 3 day(s): 2026-01-01..2026-01-03" in err
    assert not (tmp_path / "e").exists()         # refused before any engine started: nothing written


@pytest.mark.parametrize("argv, hint", [
    (["evalute"], "did you mean 'evaluate'"),
    (["evaluate", "--logs", "x", "--out", "y", "--engine", "duck"], "did you mean 'duckdb'"),
    (["evaluate", "--logs", "x", "--out", "y", "--form", "2026-01-01"], "--form (did you mean '--from'?)"),
    (["validate", "--logs", "{logs}", "--checks", "a,suport", "--out", "{tmp}/v"], "did you mean c (support)"),
    (["evaluate", "--logs", "{logs}", "--decisions", "{decisions}", "--estimators", "pi", "--policies", "oracel",
      "--out", "{tmp}/e"], "did you mean 'oracle'"),
    (["evaluate", "--logs", "{logs}", "--decisions", "{decisions}", "--estimators", "slate_p", "--out", "{tmp}/e"],
     "did you mean"),
])
def test_unknown_names_get_did_you_mean(gen, tmp_path, capsys, argv, hint):
    argv = [a.format(logs=gen / "logs", decisions=gen / "decisions", tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    assert hint in capsys.readouterr().err
