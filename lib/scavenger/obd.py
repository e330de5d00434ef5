"""Ingest of the Open Bandit Dataset (OBD) into the impression-log contract.

Each OBD row is one item shown at one position; the rows of one impression cannot be re-joined in the sample,
so each row becomes a one-slot impression at its logged position (``../shared/data/obd/README.md``).
Source: Saito, Aihara, Matsutani, Narita, "Open Bandit Dataset and Pipeline", NeurIPS 2021 Datasets and
Benchmarks (CC BY 4.0, ZOZO, Inc.).

Layout expected under the root: ``<policy>/<campaign>/<campaign>.csv`` for policy in {random, bts} and
campaign in {all, men, women}; the full dataset has the same layout.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .contract import LOGS, load_contract
from .errors import UsageError
from .obd_csv import (  # noqa: F401 - OBD_COLUMNS and the checks re-exported
    INDEX_COLUMN,
    OBD_COLUMNS,
    USER_FEATURES,
    check_obd_csv,
    check_obd_files,
)

POLICIES = ("random", "bts")
CAMPAIGNS = ("all", "men", "women")

if TYPE_CHECKING:       # pandas only in annotations: the module loads without it until a frame is made
    import pandas as pd


def obd_files(root: str | Path, policies=POLICIES, campaigns=CAMPAIGNS) -> list[tuple[str, str, Path]]:
    """(policy, campaign, csv path) for every file present; UsageError if none, the root is missing or a path where
    a CSV belongs is not a file."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"no such OBD directory: {root}")
    found = []
    for policy in policies:
        for campaign in campaigns:
            path = root / policy / campaign / f"{campaign}.csv"
            if path.exists() or path.is_symlink():
                if not path.is_file():
                    raise UsageError(f"--obd-dir: {path} is {'a directory' if path.is_dir() else 'not a file'}, "
                                     f"not an OBD CSV file")
                found.append((policy, campaign, path))
    if not found:
        raise UsageError(f"no OBD files (<policy>/<campaign>/<campaign>.csv) under {root}")
    return found


def obd_sql(policy: str, campaign: str, raw: str, index_column: str) -> str:
    """One OBD CSV (relation ``raw``, every column text) as contract rows, in Spark SQL (DuckDB through sqlglot):
    one-slot impressions; ad_id is ``<campaign>/<item_id>`` (item ids are per campaign), context_id is the
    campaign, user features go into ``context``; event_time is the CSV's timestamp (with its UTC offset), dt its
    UTC date. Values that do not parse become null (the gate quarantines them with a reason)."""
    from .contract import select_sql

    ts = "try_cast(`timestamp` AS TIMESTAMP)"
    features = ", ".join(f"'{name}', `{name}`" for name in USER_FEATURES)
    slot = (f"named_struct('position', try_cast(`position` AS INT), 'ad_id', concat('{campaign}/', `item_id`), "
            f"'propensity', try_cast(`propensity_score` AS DOUBLE), 'reward', try_cast(`click` AS DOUBLE))")
    return select_sql(LOGS, {
        "event_id": f"concat('obd-{policy}-{campaign}-', `{index_column.replace('`', '``')}`)", "event_time": ts,
        "context_id": f"'{campaign}'", "context": f"map({features}, 'campaign', '{campaign}')",
        "logging_policy": f"'{policy}'", "slots": f"array({slot})", "slate_reward": "CAST(NULL AS DOUBLE)",
        "dt": f"CAST({ts} AS DATE)"}, raw)


def _register(engine, root, policies, campaigns) -> str:
    """Every OBD file as a raw relation of ``engine``; returns the union statement of their contract rows."""
    parts = []
    for i, (policy, campaign, path) in enumerate(obd_files(root, policies, campaigns)):
        raw = f"_obd_raw_{i}"
        engine.read_csv(raw, str(path))
        parts.append(obd_sql(policy, campaign, raw, engine.columns(raw)[0]))   # the unnamed index column
    return " UNION ALL ".join(f"SELECT * FROM ({p}) _p{i}" for i, p in enumerate(parts))


def ingest_obd(spark, root: str | Path, policies=POLICIES, campaigns=CAMPAIGNS):
    """All OBD files under ``root`` as one contract Spark DataFrame (the statement of :func:`obd_sql`)."""
    from .engines import open_engine

    engine = open_engine("spark", "ingest_obd", spark=spark)    # not closed: the DataFrame reads its CSV views
    return engine.relation(_register(engine, root, policies, campaigns))


def ingest_obd_to(engine, root: str | Path, out_logs: str, policies=POLICIES, campaigns=CAMPAIGNS) -> dict:
    """Every OBD file under ``root`` written as contract logs under ``out_logs`` (Parquet by dt; the days written
    are replaced, others kept) by ``engine`` (DuckDB: no JVM; Spark); returns {"policy/campaign": {"rows",
    "clicks"}} counted from the written logs."""
    from .io.sources import describe

    engine.write(_register(engine, root, policies, campaigns), out_logs, None)
    contract = load_contract(LOGS)
    engine.read("_obd_written", describe(out_logs, contract), contract, None)
    rows = engine.fetch("SELECT logging_policy, context_id, CAST(count(1) AS BIGINT) AS n_rows, "
                        "sum(element_at(slots, 1).reward) AS clicks FROM _obd_written "
                        "GROUP BY logging_policy, context_id ORDER BY logging_policy, context_id")
    return {f"{r.logging_policy}/{r.context_id}": {"rows": int(r.n_rows), "clicks": float(r.clicks)}
            for r in rows.itertuples()}


# ---------------------------------------------------------------------------------------------------------------
# The BTS target for the random logs (`scavenger obd-target`): pandas and pyarrow, local paths, no engine.

ESTIMATES = ("harmonic", "frequency")


def read_obd_csv(path: str | Path) -> "pd.DataFrame":
    """The columns of one OBD CSV that the contract uses (index kept as text, timestamps parsed as UTC)."""
    import pandas as pd

    wanted = {INDEX_COLUMN, "timestamp", "item_id", "position", "click", "propensity_score", *USER_FEATURES}
    frame = pd.read_csv(path, usecols=lambda c: c in wanted, dtype={INDEX_COLUMN: str, "item_id": str,
                                                                     **{f: str for f in USER_FEATURES}})
    frame["event_time"] = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    frame["position"] = frame["position"].astype("int32")
    return frame


def _dt_column(frame):
    return frame["event_time"].dt.date


def write_by_dt(table, uri: str) -> list[str]:
    """A contract table as Parquet partitioned by dt under a local path; the days it holds are replaced whole
    (staged, then swapped in), the others kept."""
    import uuid

    import pyarrow as pa
    import pyarrow.dataset as pds

    from .io import fs
    from .io.partitions import commit_partitions

    target = fs.local_path(uri)
    staging = fs.join(target, "_staging", uuid.uuid4().hex)
    try:
        pds.write_dataset(table, staging, format="parquet",
                          partitioning=pds.partitioning(pa.schema([("dt", pa.date32())]), flavor="hive"),
                          basename_template="part-{i}.zstd.parquet", existing_data_behavior="overwrite_or_ignore",
                          file_options=pds.ParquetFileFormat().make_write_options(compression="zstd"))
        days = sorted(set(table.column("dt").to_pylist()))
        return commit_partitions(staging, target, days)
    finally:
        fs.delete_own(staging)


def bts_action_distribution(bts: "pd.DataFrame", campaign: str, estimate: str = "harmonic") -> "pd.DataFrame":
    """BTS's per-position action distribution pi_p(a) from its own logs (one campaign's CSV, :func:`read_obd_csv`).

    BTS's probabilities change over the logged period (history-dependent, context-free); the target is their
    average over the period, per position p:

    - ``harmonic`` (default): n_pa / sum_{rows at p showing a} 1/propensity, the harmonic mean of the logged
      propensities. Every round at p adds pi_t(a) to E[n_pa] and pi_t(a) * 1/pi_t(a) = 1 to E[sum 1/pi], so this is
      a ratio estimate of (1/T_p) sum_t pi_t(a|p), BTS's time-averaged probability. It reads the logged
      propensities; the plain mean of the propensities would not do: rows are drawn in proportion to pi, so that
      mean is E[pi^2]/E[pi], too high.
    - ``frequency``: n_pa / n_p, the share of BTS's rows at p that show a (unbiased, ignores the propensities).

    Either way the probabilities are normalized to sum to 1 per position (``raw`` keeps the estimate before);
    items BTS never showed at p get no entry (probability 0). Columns: campaign, position, item_id, ad_id,
    probability, raw, n_logged, mean_propensity."""
    import numpy as np
    import pandas as pd

    if estimate not in ESTIMATES:
        raise UsageError(f"--estimate must be one of {', '.join(ESTIMATES)}; got {estimate!r}")
    from .errors import DataCheckFailed

    p = bts["propensity_score"].astype(float)
    bad = ~(p > 0) | ~np.isfinite(p)
    if bad.any():
        raise DataCheckFailed(f"BTS logs of campaign {campaign} (bts/{campaign}/{campaign}.csv): propensity_score "
                              f"must be a finite number > 0 on every row; {int(bad.sum())} row(s) are not (first: "
                              f"{float(p[bad].iloc[0])!r} at row index {bts.loc[bad, INDEX_COLUMN].iloc[0]})")
    g = bts.assign(inv=1.0 / p, p=p).groupby(["position", "item_id"], sort=True)
    out = g.agg(n_logged=("p", "size"), inv=("inv", "sum"), mean_propensity=("p", "mean")).reset_index()
    if estimate == "harmonic":
        out["raw"] = out["n_logged"] / out["inv"]
    else:
        out["raw"] = out["n_logged"] / out.groupby("position")["n_logged"].transform("sum")
    out["probability"] = out["raw"] / out.groupby("position")["raw"].transform("sum")
    out["campaign"] = campaign
    out["ad_id"] = campaign + "/" + out["item_id"].astype(str)
    out["item_id"] = out["item_id"].astype(int)
    out["position"] = out["position"].astype("int32")
    cols = ["campaign", "position", "item_id", "ad_id", "probability", "raw", "n_logged", "mean_propensity"]
    return pd.DataFrame(out[cols]).sort_values(["position", "item_id"], ignore_index=True)


def target_decisions(events: "pd.DataFrame", campaign: str, dist: "pd.DataFrame", policy_id: str = "bts"):
    """Decisions (contract ``decisions``, a pyarrow Table) of the target ``dist`` for the logged events of
    one campaign's random logs (:func:`read_obd_csv`): each row is a one-slot impression at its position p, so the
    decision for it is pi_p(.), one entry per item with a positive probability at p. Events whose position the
    target does not cover get an empty decision (the target puts no mass there)."""
    import numpy as np
    import pyarrow as pa

    from .contract import DECISIONS, arrow_schema

    schema = arrow_schema(DECISIONS)
    slot_type = schema.field("slots").type
    dist = dist[dist["probability"] > 0].sort_values(["position", "item_id"], ignore_index=True)
    starts = dist.groupby("position").indices      # position -> row numbers of its block in ``dist``
    positions = events["position"].to_numpy()
    blocks = [starts.get(int(p), np.array([], dtype=np.int64)) for p in positions]
    lengths = np.fromiter((len(b) for b in blocks), dtype=np.int64, count=len(blocks))
    take = np.concatenate(blocks) if len(blocks) else np.array([], dtype=np.int64)
    entries = pa.StructArray.from_arrays(
        [pa.array(dist["position"].to_numpy()[take], pa.int32()),
         pa.array(dist["ad_id"].to_numpy(dtype=object)[take], pa.string()),
         pa.array(dist["probability"].to_numpy(dtype=float)[take], pa.float64())],
        fields=list(slot_type.value_type))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    n = len(events)
    columns = {
        "policy_id": pa.array([policy_id] * n, pa.string()),
        "event_id": pa.array([f"obd-random-{campaign}-{i}" for i in events[INDEX_COLUMN]], pa.string()),
        "slots": pa.ListArray.from_arrays(pa.array(offsets), entries).cast(slot_type),
        "base_policy": pa.nulls(n, pa.string()),
        "dt": pa.array(_dt_column(events), pa.date32()),
    }
    return pa.Table.from_pydict(columns, schema=schema)


def on_policy_rate(frame: "pd.DataFrame", campaign: str, policy: str = "bts") -> dict:
    """The logging policy's own click rate on its traffic (mean click per row) with its standard error."""
    import math

    clicks = frame["click"].astype(float)
    n = len(clicks)
    rate = float(clicks.mean()) if n else float("nan")
    se = math.sqrt(rate * (1 - rate) / n) if n > 1 else float("nan")
    return {"policy": policy, "campaign": campaign, "rows": n, "clicks": float(clicks.sum()), "rate": rate,
            "std_error": se}
