"""The statistics layer: one pass per day of the logs (+ decisions) -> small additive tables, stored per day.

``declarations`` declares every table once (its statement, keys, merge rules, side); ``plan.plan_for`` picks the
tables a run needs; ``scan.scan_days`` runs their Spark SQL statements (``statistics/sql``) on an engine (DuckDB or
Spark); ``tables.merge`` adds days; ``store`` keeps each day's tables; ``window`` assembles a window from stored
and newly scanned days.
"""
from .declarations import TABLES
from .plan import ScanPlan, plan_for
from .scan import STATS_VERSION, StatsConfig, scan_days
from .tables import merge, merge_all, split_by_dt

__all__ = ["STATS_VERSION", "StatsConfig", "ScanPlan", "plan_for", "scan_days", "TABLES", "merge", "merge_all",
           "split_by_dt"]
