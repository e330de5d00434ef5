"""The notebook API says what the CLI says (issue 60): a result's repr is the CLI's summary (at most 4,000
characters) with the full tables one attribute away; what the CLI refuses with exit 3 the API raises
(DataCheckFailed) or warns (DataCheckWarning) with the same message; names it does not know get "did you mean";
pandas and pyarrow frames give the numbers paths give. DuckDB only, small generated logs."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import scavenger
from scavenger import cli
from scavenger.errors import DataCheckFailed, DataCheckWarning, UsageError


def _generate(out, layout: str, **kw):
    from scavenger.simulation.generator import GeneratorConfig, generate

    cfg = GeneratorConfig(layout=layout, logging="uniform", n_positions=3, n_contexts=4, days=2,
                          events_per_day=1500, seed=11, **kw)
    generate("duckdb", cfg, str(out))
    return out


@pytest.fixture(scope="module")
def slotted(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("api_results") / "slotted", "slotted", slot_sizes=[2, 3, 4])


@pytest.fixture(scope="module")
def evaluation(slotted):
    return scavenger.evaluate(str(slotted / "logs"), str(slotted / "decisions"), engine="duckdb")


def test_repr_is_the_cli_summary_with_the_tables_one_attribute_away(evaluation, slotted, tmp_path, capsys):
    text = repr(evaluation)
    assert len(text) <= 4000
    assert text.startswith("scavenger evaluate: ok -- window 2026-01-01..2026-01-02")
    assert "estimates (value: reward per logged event, interval; * = recommended):" in text and "checks:" in text
    assert "full tables: .estimates (" in text and ".diagnostics (" in text
    assert evaluation.estimates is evaluation.pandas and evaluation.diagnostics is evaluation.diagnostics_pandas
    assert evaluation._repr_html_().startswith("<pre>") and len(evaluation._repr_html_()) < 6000
    # the CLI prints the same estimate lines (run_summary.summary_lines for both)
    assert cli.main(["evaluate", "--logs", str(slotted / "logs"), "--decisions", str(slotted / "decisions"),
                     "--out", str(tmp_path / "ev")]) == 0
    printed = capsys.readouterr().out
    mine = [line for line in text.splitlines() if line.startswith("  ") and "[" in line]
    assert mine and all(line in printed for line in mine)


def test_repr_stays_short_however_many_rows(evaluation):
    """1,000 policies' worth of estimate lines: the repr is cut at 4,000 characters and says how many lines were
    left out; the tables keep every row."""
    import copy

    from scavenger.run_summary import estimate_rows

    many = copy.copy(evaluation)
    run = copy.deepcopy(evaluation._run)
    rows = estimate_rows(evaluation.estimates)
    run.summary["estimates"] = [dict(r, policy_id=f"policy_{i}") for i in range(1000 // len(rows) + 1)
                                for r in rows]
    many._run = run
    text = repr(many)
    assert len(text) <= 4000 and "more line(s) not shown" in text
    assert text.splitlines()[-1].startswith("full tables: .estimates")


def test_adc_on_slotted_logs_raises_what_the_cli_exits_3_with(slotted, tmp_path, capsys):
    """Before: scavenger.adc on slotted logs returned NaN rows without a word, where the CLI exits 3."""
    with pytest.raises(DataCheckFailed) as exc:
        scavenger.adc(str(slotted / "logs"), engine="duckdb", gate="off")
    assert "no ad was shown at more than one position" in str(exc.value)
    assert cli.main(["adc", "--gate", "off", "--logs", str(slotted / "logs"), "--out", str(tmp_path / "adc")]) == 3
    assert str(exc.value) in capsys.readouterr().err


def test_validate_warns_with_the_message_the_cli_exits_3_with(slotted, tmp_path, capsys):
    kw = dict(checks="a,e", reward_max=0.5)        # every clicked row above it: quarantined, the share fails
    with pytest.warns(DataCheckWarning) as caught:
        v = scavenger.validate(str(slotted / "logs"), engine="duckdb", **kw)
    assert v.failed and str(caught[0].message) == v.message
    assert "full tables: .validation (" in repr(v) and v.validation is v.pandas
    with pytest.raises(DataCheckFailed, match="quarantine"):
        v.raise_if_failed()
    assert cli.main(["validate", "--logs", str(slotted / "logs"), "--checks", "a,e", "--reward-max", "0.5",
                     "--no-great-expectations", "--out", str(tmp_path / "val")]) == 3
    assert v.message in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataCheckWarning)
        scavenger.validate(str(slotted / "logs"), engine="duckdb", checks="a,e", gate="off")   # off: no checks


def test_evaluate_warnings_are_data_check_warnings(slotted):
    """The CLI's warnings (estimates that left rows unused) reach the notebook as DataCheckWarnings."""
    from scavenger.pipelines.evaluate import unused_rows

    est = pd.DataFrame({"policy_id": ["p"], "estimator": ["slate_pi"], "identified": [True], "n_events": [90],
                        "n_unused": [10], "unused_reasons": ["missing propensity 10"]})
    messages, _ = unused_rows(est)
    from scavenger import api

    with pytest.warns(DataCheckWarning, match="used 90 of 100 rows"):
        api._warn(messages)


@pytest.mark.parametrize("call, message", [
    (lambda d: scavenger.adc(str(d / "logs"), methods=["naiv"]), "did you mean 'naive'"),
    (lambda d: scavenger.evaluate(str(d / "logs"), str(d / "decisions"), adc_method="heuristc"),
     "did you mean 'heuristic'"),
    (lambda d: scavenger.evaluate(str(d / "logs"), str(d / "decisions"), engine="duck"), "did you mean 'duckdb'"),
    (lambda d: scavenger.validate(str(d / "logs"), checks="a,suport"), r"did you mean c \(support\)"),
    (lambda d: scavenger.adc(str(d / "logs"), gate="enforced"), "did you mean 'enforce'"),
    (lambda d: scavenger.adc(str(d / "logs"), date_from="2025-03-01", date_to="2025-03-02"),
     "no logs in the window 2025-03-01..2025-03-02; they hold 2 day"),
])
def test_unknown_names_and_windows_are_usage_errors_that_say_what_was_meant(slotted, call, message):
    with pytest.raises(UsageError, match=message):
        call(slotted)


def test_frames_give_the_numbers_paths_give(slotted, evaluation):
    """pandas frames (NumPy-backed as pd.read_parquet gives them, and pyarrow-backed) and pyarrow tables: the same
    estimates as the paths (the frames' slots and contexts converted to the contract's Arrow types at once)."""
    from scavenger.contract import load_contract
    from scavenger.io.frames import _typed_from_pandas

    logs, decisions = str(slotted / "logs"), str(slotted / "decisions")
    inputs = {"pandas": (pd.read_parquet(logs), pd.read_parquet(decisions)),
              "pandas_arrow": (pd.read_parquet(logs, dtype_backend="pyarrow"),
                               pd.read_parquet(decisions, dtype_backend="pyarrow")),
              "pyarrow": (pq.read_table(logs), pq.read_table(decisions))}
    typed = _typed_from_pandas(inputs["pandas"][0], load_contract("impression_log"))
    assert str(typed.schema.field("slots").type).startswith("list<item: struct<position: int32, ad_id: string")
    key = ["policy_id", "estimator", "interval_kind"]
    want = evaluation.estimates.sort_values(key).reset_index(drop=True)
    for kind, (lg, dc) in inputs.items():
        got = scavenger.evaluate(lg, dc, engine="duckdb").estimates.sort_values(key).reset_index(drop=True)
        assert got[key].values.tolist() == want[key].values.tolist(), kind
        for col in ("value", "ci_low", "ci_high", "std_error"):
            np.testing.assert_allclose(got[col].to_numpy(float), want[col].to_numpy(float), rtol=0, atol=1e-12,
                                       err_msg=f"{kind} {col}")


def test_a_frame_whose_values_do_not_fit_the_types_is_read_as_before(slotted):
    """Slots whose values are not of the contract's kinds (an ad_id given as a number, a position 1.5, a cell
    without slots) are converted as pyarrow infers them and conformed as before: the typed conversion is only a
    faster way to the same table, and never truncates 1.5 to 1."""
    import pyarrow as pa

    from scavenger.io.frames import _list_of_structs

    typ = pa.list_(pa.struct([("position", pa.int32()), ("ad_id", pa.string()), ("propensity", pa.float64())]))
    cell = {"position": 1, "ad_id": "a", "propensity": float("nan")}
    assert _list_of_structs(pd.Series([[cell], []]), typ).to_pylist() == \
        [[{"position": 1, "ad_id": "a", "propensity": None}], []]          # NaN is null, as from pandas
    for odd in ([dict(cell, ad_id=3)], [dict(cell, position=1.5)], None, [("1", "a", 0.5)]):
        assert _list_of_structs(pd.Series([odd, [cell]], dtype=object), typ) is None, odd
    logs = pd.read_parquet(str(slotted / "logs"))
    odd = logs.assign(slots=[[dict(s, ad_id=i) for i, s in enumerate(row)] for row in logs["slots"]])
    v = scavenger.validate(odd, engine="duckdb", checks="b", gate="report")
    assert v.counts["logs"]["rows_in"] == len(logs)
