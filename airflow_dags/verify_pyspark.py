"""Check that the installed ``pyspark`` is one consistent release (no files of ``pyspark-client`` over it).

    python airflow_dags/verify_pyspark.py --expect 4.3.0 [--session]

Exit 0 when: ``pyspark.__version__`` and pyspark's metadata both say the expected version; every file listed in
pyspark's RECORD exists with the recorded sha256; and, if ``pyspark-client`` is installed, each of its files is
also a pyspark file whose content is pyspark's (so pyspark-client shadows nothing). ``--session`` also starts a
local[1] SparkSession and checks that the JVM side reports the same version and computes a sum.
Exit 3 (data check failed) with one line per problem otherwise.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import sys
from importlib import metadata
from pathlib import Path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _recorded(dist: metadata.Distribution) -> dict[str, str | None]:
    """RECORD of a distribution: relative path -> 'sha256=...' (None for files recorded without hash)."""
    out: dict[str, str | None] = {}
    for f in dist.files or []:
        out[str(f)] = f"{f.hash.mode}={f.hash.value}" if f.hash else None
    return out


def check(expect: str) -> list[str]:
    """Return the list of problems (empty when pyspark is consistent at version ``expect``)."""
    problems: list[str] = []
    try:
        dist = metadata.distribution("pyspark")
    except metadata.PackageNotFoundError:
        return ["pyspark is not installed"]
    if dist.version != expect:
        problems.append(f"pyspark metadata version is {dist.version}, expected {expect}")
    import pyspark

    if pyspark.__version__ != expect:
        problems.append(f"pyspark.__version__ is {pyspark.__version__}, expected {expect} "
                        "(files of another pyspark build shadow it; reinstall pyspark --no-deps --force-reinstall)")
    root = Path(dist.locate_file(""))
    if Path(pyspark.__file__).resolve().parent != (root / "pyspark").resolve():
        problems.append(f"`import pyspark` loads {pyspark.__file__}, not the pyspark distribution under {root}")
    record = _recorded(dist)
    bad = []
    for rel, want in record.items():
        if want is None:
            continue
        path = root / rel
        if not path.exists():
            bad.append(f"missing {rel}")
        elif _sha256(path) != want:
            bad.append(f"changed {rel}")
    if bad:
        problems.append(f"{len(bad)} pyspark file(s) differ from pyspark {dist.version}'s RECORD, e.g. "
                        + "; ".join(bad[:5]))
    try:
        client = metadata.distribution("pyspark-client")
    except metadata.PackageNotFoundError:
        client = None
    if client is not None:
        client_root = Path(client.locate_file(""))
        own_meta = f"pyspark_client-{client.version}.dist-info/"
        stray = [rel for rel in _recorded(client)
                 if not rel.startswith(own_meta) and rel not in record
                 and (client_root / rel).exists()]
        if stray:
            problems.append(f"pyspark-client {client.version} installed {len(stray)} file(s) that pyspark does "
                            f"not own, e.g. {', '.join(stray[:5])}")
    return problems


def check_session(expect: str) -> list[str]:
    """Start a local[1] SparkSession; the JVM must report ``expect`` and compute sum(0..9) = 45."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("verify-pyspark")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        problems = []
        if spark.version != expect:
            problems.append(f"the Spark JVM reports {spark.version}, expected {expect}")
        total = spark.range(10).groupBy().sum("id").first()[0]
        if total != 45:
            problems.append(f"local SparkSession computed sum(0..9) = {total}")
        return problems
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", required=True, help="the pyspark version that must be installed")
    parser.add_argument("--session", action="store_true", help="also start a local SparkSession")
    args = parser.parse_args(argv)
    problems = check(args.expect)
    if not problems and args.session:
        problems = check_session(args.expect)
    for p in problems:
        print(f"verify_pyspark: {p}", file=sys.stderr)
    if problems:
        return 3
    print(f"verify_pyspark: pyspark {args.expect} is consistent"
          + (" and a local SparkSession works" if args.session else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
