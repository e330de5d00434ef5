"""Gate flags shared by `adc` and `evaluate` (the checks of `scavenger validate`, run in the same job)."""
from __future__ import annotations

from ..errors import UsageError


def add_gate_arguments(parser) -> None:
    group = parser.add_argument_group("data gate (same checks as `scavenger validate`)")
    group.add_argument("--gate", choices=("enforce", "report", "off"), default="enforce",
                       help="enforce (default): quarantine bad rows and exit 3 instead of writing an estimate whose "
                            "assumption failed; report: run the checks and mark the estimates; off: no checks")
    group.add_argument("--max-quarantine-share", type=float, default=0.001,
                       help="fail when more than this share of rows is quarantined (default 0.001)")
    group.add_argument("--allow-partial-slates", action="store_true",
                       help="slates need not hold every position 1..K (e.g. one-slot OBD rows)")
    group.add_argument("--reward-max", type=float, default=None, help="declared maximum reward (default 1)")
    group.add_argument("--cramers-v-max", type=float, default=None,
                       help="check a: largest Cramer's V between a context feature and the logged ad")
    group.add_argument("--no-great-expectations", action="store_true",
                       help="skip the great-expectations suites inside the gate (validate still runs them)")


def gate_config_from_args(args, out_dir: str | None, run_id: str):
    """GateConfig for the flags, or None for --gate off."""
    if args.gate == "off":
        return None
    if not 0 <= args.max_quarantine_share <= 1:
        raise UsageError("--max-quarantine-share must be in [0, 1]")
    from ..checks.gate import GateConfig
    from ..checks import assumptions as A
    from ..checks import rules as R

    rules = R.RuleConfig()
    if args.allow_partial_slates and hasattr(rules, "allow_partial_slates"):
        rules.allow_partial_slates = True
    if args.reward_max is not None and hasattr(rules, "reward_max"):
        rules.reward_max = args.reward_max
    assumptions = A.AssumptionConfig()
    if args.cramers_v_max is not None and hasattr(assumptions, "cramers_v_max"):
        assumptions.cramers_v_max = args.cramers_v_max
    return GateConfig(rules=rules, assumptions=assumptions, max_quarantine_share=args.max_quarantine_share,
                      gate=(args.gate == "enforce"), great_expectations=not args.no_great_expectations,
                      out_dir=out_dir, run_id=run_id)
