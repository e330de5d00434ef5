"""An OBD CSV file as the ingest and the target read it: its columns (the unnamed row index, the user features)
and the checks of a file before anything is written (the header, exit 2; every row, exit 3)."""
from __future__ import annotations

from pathlib import Path

from .errors import UsageError

USER_FEATURES = ("user_feature_0", "user_feature_1", "user_feature_2", "user_feature_3")
INDEX_COLUMN = "Unnamed: 0"   # the CSV's unnamed pandas index column (Spark calls it _c0); event ids come from it

# The columns of an OBD CSV that the ingest and the target read (besides the unnamed row index, the first column),
# and for each the SQL test of a value that does not parse (a VARCHAR column ``c``).
OBD_COLUMNS = ("timestamp", "item_id", "position", "click", "propensity_score", *USER_FEATURES)
_UNPARSED = {"timestamp": "try_cast({c} AS TIMESTAMPTZ) IS NULL",
             "item_id": "try_cast({c} AS BIGINT) IS NULL",
             "position": "try_cast({c} AS INTEGER) IS NULL",
             "click": "try_cast({c} AS DOUBLE) IS NULL",
             "propensity_score": "try_cast({c} AS DOUBLE) IS NULL"}
_SHOWN = 3                                    # bad lines / values named in a message


def _header(path: Path) -> list[str]:
    """The header fields of an OBD CSV; UsageError (exit 2) when the file is empty, its header is not UTF-8 text
    or it lacks a column the ingest reads."""
    import csv

    with open(path, "rb") as fh:
        first = fh.readline()
    if not first.strip():
        raise UsageError(f"--obd-dir: {path} is empty (no header line); expected an OBD CSV with the columns "
                         f"{', '.join(OBD_COLUMNS)}")
    try:
        fields = next(csv.reader([first.decode("utf-8").rstrip("\r\n")]))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        raise UsageError(f"--obd-dir: {path}: the header line is not UTF-8 CSV text; expected an OBD CSV with the "
                         f"columns {', '.join(OBD_COLUMNS)}") from None
    missing = [c for c in OBD_COLUMNS if c not in fields]
    if fields and fields[0] not in ("", INDEX_COLUMN):
        missing.insert(0, "the unnamed row index (first column)")
    if missing:
        raise UsageError(f"--obd-dir: {path} is not an OBD CSV: missing column(s) {', '.join(missing)} (header has "
                         f"{len(fields)} column(s))")
    return fields


def check_obd_csv(path: str | Path) -> dict:
    """Check one OBD CSV before anything is written: its header (:func:`_header`, exit 2), then every row, read as
    text with DuckDB (no type guessing): rows that cannot be split into the header's columns (too few or too many
    fields, bytes that are not UTF-8) and rows whose timestamp, item_id, position, click or propensity_score does
    not parse. Any such row, or a file without rows, fails the check (DataCheckFailed, exit 3, naming the file, the
    count and the first lines or row indexes): the OBD ingest writes every row of its files or none, so no row
    vanishes. Returns {"rows": n}."""
    import duckdb

    from .errors import DataCheckFailed

    path = Path(path)
    fields = _header(path)
    con = duckdb.connect()
    try:
        cols = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(fields))) + "}"
        quoted = "'" + str(path).replace("'", "''") + "'"
        src = (f"read_csv({quoted}, header = true, auto_detect = false, columns = {cols}, delim = ',', "
               f"quote = '\"', escape = '\"', store_rejects = true)")
        index = "c0"
        tests = {name: _UNPARSED[name].format(c=f"c{fields.index(name)}") for name in _UNPARSED}
        counts = ", ".join(f"count(*) FILTER (WHERE {t})" for t in tests.values())
        row = con.execute(f"SELECT count(*), {counts} FROM {src}").fetchall()[0]   # all: the rejects table is
        # filled once the scan is consumed
        n_rows, bad = int(row[0]), dict(zip(tests, (int(x) for x in row[1:])))
        rejected = con.execute("SELECT line, any_value(error_type), count(*) FROM reject_errors GROUP BY line "
                               "ORDER BY line").fetchall()
        if rejected:
            shown = "; ".join(f"line {int(ln)}: {str(kind).lower()}" for ln, kind, _ in rejected[:_SHOWN])
            raise DataCheckFailed(
                f"{path}: {len(rejected)} line(s) cannot be read as rows of its {len(fields)} columns ({shown}"
                f"{'; ...' if len(rejected) > _SHOWN else ''}); fix or remove them: nothing was written (an OBD "
                f"file is read whole or not at all)", counts={"obd_csv": {"file": str(path), "rows_read": n_rows,
                                                                   "lines_rejected": len(rejected)}})
        bad = {k: v for k, v in bad.items() if v}
        if bad:
            name = next(iter(bad))
            first = con.execute(f"SELECT {index}, c{fields.index(name)} FROM {src} WHERE {tests[name]} "
                                f"LIMIT {_SHOWN}").fetchall()
            shown = ", ".join(f"{v!r} at row index {i}" for i, v in first)
            raise DataCheckFailed(
                f"{path}: {sum(bad.values())} value(s) do not parse ({', '.join(f'{k} {v}' for k, v in bad.items())}; "
                f"first {name}: {shown}); fix or remove those rows: nothing was written (an OBD file is read "
                f"whole or not at all)", counts={"obd_csv": {"file": str(path), "rows_read": n_rows,
                                                     "values_unparsed": bad}})
        if n_rows == 0:
            raise DataCheckFailed(f"{path} holds no rows (a header only): nothing to read from it; remove the file "
                                  f"or leave its campaign out (--campaigns)")
        return {"rows": n_rows}
    except duckdb.Error as exc:          # the reader itself gave up (e.g. an unterminated quote): the file's fault
        raise DataCheckFailed(f"{path}: cannot be read as CSV ({str(exc).splitlines()[0]}); nothing was "
                              f"written") from None
    finally:
        con.close()


def check_obd_files(files) -> dict:
    """:func:`check_obd_csv` of every (policy, campaign, path); {"policy/campaign": {"rows": n}}."""
    return {f"{policy}/{campaign}": check_obd_csv(path) for policy, campaign, path in files}

