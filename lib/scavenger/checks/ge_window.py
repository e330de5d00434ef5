"""great-expectations suites on what the one pass already computed, the same on both engines (pandas batches):

- ``<table>.contract`` on the inputs' schemas (one row per group of files sharing a schema, one column per contract
  column holding the type found): required columns exist and have the contract's type. Schema only, no scan.
- ``<table>.daily`` on the per-dt counts of the pass (rows, quarantined share, rows per reason code, ranges of
  propensities, rewards, probabilities): exact, at no extra cost.
- ``<table>.quality`` (``schemas/expectations/*.quality.json``) is reserved for ``--ge-row-sample``: not run.
Data Docs are written under ``docs_dir``. Verdict rows have the gate's shape (check, scope, statistic, ...).
"""
from __future__ import annotations

import pandas as pd

from ..contract import DECISIONS, LOGS, load_contract


def _spark_type_name(arrow_type) -> str:
    from pyspark.sql.pandas.types import from_arrow_type

    try:
        name = from_arrow_type(arrow_type).simpleString()
    except Exception:  # noqa: BLE001 - a type Spark has no name for
        return str(arrow_type)
    return name.replace("timestamp_ntz", "timestamp")   # naive timestamps are read as UTC instants


def schema_frame(source, contract) -> pd.DataFrame:
    """One row per group of input files (or per table): the type each contract column has there (None: absent)."""
    rows = []
    if source.kind == "files":
        for groups in source.days.values():
            for g in groups:
                found = {f.name: _spark_type_name(f.type) for f in g.schema}
                row = {c: found.get(c) for c in contract.columns}
                if g.dt is not None and contract.partition_column not in found:
                    row[contract.partition_column] = "date"
                rows.append(row)
    elif source.kind in ("table", "spark"):
        rows.append({c: None for c in contract.columns} | {"_note": source.name})
    else:
        found = {f.name: _spark_type_name(f.type) for f in source.obj.schema}
        rows.append({c: found.get(c) for c in contract.columns})
    df = pd.DataFrame(rows, columns=contract.columns)
    return df.drop_duplicates().reset_index(drop=True)


def schema_suite_spec(name: str) -> dict:
    """The contract suite from ``schemas/<name>.schema.json`` (written to ``schemas/expectations/``)."""
    contract = load_contract(name)
    exps = []
    for f in contract.struct_type().fields:
        optional = f.name not in contract.required_columns
        if not optional:
            exps.append({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": f.name},
                         "meta": {"contract": name, "notes": "the column exists in every input file"}})
        exps.append({"type": "expect_column_values_to_be_in_set",
                     "kwargs": {"column": f.name, "value_set": [f.dataType.simpleString()]},
                     "meta": {"contract": name, "optional": optional,
                              "notes": "another type is cast by the reader; values that do not parse are "
                                       "quarantined"}})
    return {"name": f"{name}.contract", "expectations": exps,
            "meta": {"description": f"Generated from schemas/{name}.schema.json, run on the inputs' schemas (one "
                                    f"row per group of files sharing a schema): required columns exist and every "
                                    f"column has the contract's type. A missing required column fails the job "
                                    f"(exit 3); a wrong type is cast and values that do not parse are "
                                    f"quarantined."}}


def run_window_suites(window, inputs, gate, docs_dir: str | None) -> list[dict]:
    from . import expectations as G
    from .judge import _per_day

    runner = G.GERunner(docs_dir)
    params = {"reward_min": gate.rules.reward_min, "reward_max": gate.rules.reward_max,
              "sum_tolerance": gate.rules.sum_tolerance, "max_quarantine_share": gate.max_quarantine_share,
              "max_id_length": gate.rules.max_id_length}
    rows = []
    for name, source, counts in ((LOGS, inputs.logs, "log_counts"), (DECISIONS, inputs.decisions, "decision_counts")):
        if source is None:
            continue
        schema = schema_frame(source, load_contract(name))
        if source.kind in ("files", "arrow"):
            rows += runner.run(f"{name}.contract", schema, fail_verdict="warn")
        daily = _per_day(window.stats, counts)
        if len(daily):
            rows += runner.run(f"{name}.daily", G.daily_frame(daily), params)
    return rows
