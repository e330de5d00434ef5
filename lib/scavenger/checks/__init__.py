"""Data checks that gate every evaluation (issue 5): row rules + quarantine (:mod:`.rules`), assumption checks
3a-3e (:mod:`.assumptions`), great-expectations suites and Data Docs (:mod:`.expectations`), the gate
(:mod:`.gate`: :func:`run_gate`, :data:`ESTIMATOR_CHECKS`)."""
from .assumptions import AssumptionConfig
from .gate import ALL_CHECKS, ESTIMATOR_CHECKS, GateConfig, GateResult, parse_checks, run_gate
from .rules import RuleConfig

__all__ = ["ALL_CHECKS", "AssumptionConfig", "ESTIMATOR_CHECKS", "GateConfig", "GateResult", "RuleConfig",
           "parse_checks", "run_gate"]
