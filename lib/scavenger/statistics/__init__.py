"""The statistics layer: one pass per day of the logs (+ decisions) -> small additive tables, stored per day.

``scan.scan_days`` runs the Spark SQL statements of ``statistics/sql`` on an engine (DuckDB or Spark);
``tables.merge`` adds days; ``store`` keeps each day's tables; ``window`` assembles a window from stored and
newly scanned days.
"""
from .scan import STATS_VERSION, ScanPlan, StatsConfig, scan_days
from .tables import TABLES, merge, merge_all, split_by_dt

__all__ = ["STATS_VERSION", "StatsConfig", "ScanPlan", "scan_days", "TABLES", "merge", "merge_all", "split_by_dt"]
