"""The output contracts of schemas/ (estimates, adc, diagnostics) are the single source of the result tables'
columns and types: the registry reads them, the jobs write exactly them, and every estimator name a table holds
is one the registry declares. On DuckDB (no JVM)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.reference import build_random, write_parquet
from scavenger import registry
from scavenger.contract import load_contract

ARROW = {"string": pa.string(), "double": pa.float64(), "long": pa.int64(), "boolean": pa.bool_()}


@pytest.mark.parametrize("name,columns", [("estimates", registry.ESTIMATE_COLUMNS),
                                          ("adc", registry.ADC_COLUMNS),
                                          ("diagnostics", registry.DIAGNOSTIC_COLUMNS)])
def test_registry_reads_the_output_contracts(name, columns):
    spec = load_contract(name).spec
    assert list(columns) == [f["name"] for f in spec["schema"]["fields"]]
    assert all(columns[f["name"]] == f["type"] for f in spec["schema"]["fields"])
    assert all(f["metadata"].get("description") for f in spec["schema"]["fields"])


def test_every_estimator_row_name_is_declared():
    outs = registry.output_names()
    assert set(registry.ESTIMATORS) <= set(outs)
    assert {"scavenging_ad", "scavenging_base_uniform"} <= set(outs) and "reorder_lift" not in outs
    assert registry.base_of("scavenging_ad") == "scavenging_slate"
    with pytest.raises(ValueError):
        registry.base_of("no_such_row")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, cli):
    root = tmp_path_factory.mktemp("contracts")
    data = build_random(seed=21, K=3, n_ads=6, days=(0, 1), per_day=80, with_nulls=False)
    logs, decisions = write_parquet(data, root)
    out = root / "ev"
    r = cli("evaluate", "--logs", logs, "--decisions", decisions, "--out", out, "--by-day", "--gate", "report",
            "--engine", "duckdb")
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.mark.parametrize("table,contract", [("estimates", "estimates"), ("adc", "adc"),
                                            ("diagnostics", "diagnostics"), ("estimates_by_day", "estimates")])
def test_written_tables_have_the_contract_types(evaluated, table, contract):
    files = sorted((evaluated / table).rglob("*.parquet"))
    assert files, table
    for f in files:
        schema = pq.read_schema(f)
        want = [(x["name"], ARROW[x["type"]]) for x in load_contract(contract).fields]
        got = [(n, schema.field(n).type) for n in schema.names if n != "dt"]
        assert got == want, (f, got)
    if table.startswith("estimates"):
        names = set(pq.read_table(evaluated / table).column("estimator").to_pylist())
        assert names and names <= set(registry.output_names())
