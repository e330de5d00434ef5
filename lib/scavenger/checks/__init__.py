"""The data gate, as pure functions of the window's statistics: row rules as SQL flags evaluated in the one pass
(:mod:`.rules`), verdicts of the quarantine and of assumption checks a-f (:mod:`.judge`, :mod:`.assumptions`),
great-expectations suites and Data Docs (:mod:`.ge_window`, :mod:`.expectations`)."""
from .assumptions import ALL_CHECKS, CHECK_NAMES, AssumptionConfig
from .rules import RuleConfig

__all__ = ["ALL_CHECKS", "CHECK_NAMES", "AssumptionConfig", "RuleConfig"]
