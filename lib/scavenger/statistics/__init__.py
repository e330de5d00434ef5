"""The statistics layer: one scan per dt of the logs (+ decisions) -> small additive tables, stored per dt.

``scan`` (Spark, built-in SQL only) -> per-dt pandas tables; ``tables.merge`` adds days; ``store.window_statistics``
loads stored days whose fingerprint matches and scans only the missing or changed days.
"""
from .scan import STATS_VERSION, StatsConfig, scan
from .store import WindowStats, list_dates, window_statistics
from .tables import TABLES, merge, merge_all, split_by_dt

__all__ = ["STATS_VERSION", "StatsConfig", "scan", "WindowStats", "list_dates", "window_statistics", "TABLES",
           "merge", "merge_all", "split_by_dt"]
