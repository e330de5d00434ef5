"""What a job says when it ends: a short summary on stdout (rows, checks, estimates or the ADC table:
run_summary.py, which the notebook API's results show too), and the one-line advice when it ran out of
memory (the setting to raise, not an internal error)."""
from __future__ import annotations

from ..run_summary import _check_lines, _clip, _estimate_lines, _fmt, _rows_lines, summary_lines  # noqa: F401


def memory_advice(exc: BaseException) -> str | None:
    """The one-line answer when an engine ran out of memory, naming the setting to raise."""
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfMemoryError" in text or "Java heap space" in text or "GC overhead limit" in text:
        return ("Spark ran out of memory (java.lang.OutOfMemoryError): raise the driver heap with --conf "
                "spark.driver.memory=8g (or the executors' with spark.executor.memory), or use --batch-days N")
    if "Out of Memory Error" in text or "OutOfMemoryException" in text or type(exc).__name__ == "OutOfMemoryException":
        return ("DuckDB ran out of memory: raise SCAVENGER_DUCKDB_MEMORY (e.g. 16GB) or point "
                "SCAVENGER_DUCKDB_TEMP at a disk with room to spill, or use --batch-days N")
    if isinstance(exc, MemoryError):
        return "Python ran out of memory: use --batch-days N or a machine with more memory"
    return None
