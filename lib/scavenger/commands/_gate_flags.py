"""Gate flags shared by `adc` and `evaluate` (the checks of `scavenger validate`, run in the same job)."""
from __future__ import annotations

from ..errors import UsageError

CALIBRATION_SCOPE_HELP = (
    "check e: scope within which logged propensities are compared with observed frequencies. auto (default): per "
    "logging policy, and per value of context_id where context_id partitions the ads (each ad shown under one "
    "value only, e.g. the Open Bandit Dataset's campaigns, each with its own items and propensities); "
    "auto:KEY: the same test for another key; policy: per logging policy only; KEY: per logging policy and value "
    "of KEY always. KEY is context_id or context:NAME (a key of the context map, e.g. context:campaign)")


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
    group.add_argument("--calibration-scope", default="auto", help=CALIBRATION_SCOPE_HELP)




def gate_config_from_args(args, out_dir: str | None, run_id: str):
    """GateConfig for the flags, or None for --gate off."""
    if args.gate == "off":
        return None
    if not 0 <= args.max_quarantine_share <= 1:
        raise UsageError("--max-quarantine-share must be in [0, 1]")
    import dataclasses

    from ..checks import assumptions as A
    from ..checks import rules as R
    from ..checks.gate import GateConfig

    try:
        A.parse_calibration_scope(args.calibration_scope)
    except ValueError as exc:
        raise UsageError(f"--calibration-scope: {exc}") from None
    # RuleConfig and AssumptionConfig are frozen dataclasses: build them with replace, never by assignment
    rule_kw = {"allow_partial_slates": bool(args.allow_partial_slates)}
    if args.reward_max is not None:
        rule_kw["reward_max"] = args.reward_max
    rules = dataclasses.replace(R.RuleConfig(), **rule_kw)
    assumption_kw = {"calibration_scope": args.calibration_scope}
    if args.cramers_v_max is not None:
        assumption_kw["cramers_v_max"] = args.cramers_v_max
    assumptions = dataclasses.replace(A.AssumptionConfig(), **assumption_kw)
    return GateConfig(rules=rules, assumptions=assumptions, max_quarantine_share=args.max_quarantine_share,
                      gate=(args.gate == "enforce"), great_expectations=not args.no_great_expectations,
                      out_dir=out_dir, run_id=run_id)
