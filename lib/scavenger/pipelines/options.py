"""The options the jobs share, checked by one code whoever gives them: the CLI's flags (cli/shared_flags.py) and the
notebook API's keywords (api.py), below both. UsageError (exit 2) names the flag.

- the data gate: its options (the CLI's gate flags, ``--reward-max`` as ``reward_max``), their defaults and fixed
  choices, and the :class:`~scavenger.pipelines.common.GateConfig` they make (:func:`gate_config`);
- ``--max-id-length`` (the gate's and train's) and ``--adc`` with ``--adc-method`` (evaluate's and train's).
"""
from __future__ import annotations

import dataclasses
import math

from ..errors import UsageError

# the gate's options and their defaults (the CLI's gate flags take these defaults too). Importing this module
# costs nothing (the CLI builds its parser from it): the gate's classes are imported when a gate is made.
GATE_DEFAULTS = {"max_quarantine_share": 0.001, "reward_min": 0.0, "reward_max": 1.0, "cramers_v_max": 0.1,
                 "calibration_scope": "auto", "duplicates": "keep_first", "max_slots": 64, "max_id_length": 1000,
                 "require_full_slates": False, "quarantine_null_propensity": False, "great_expectations": True}
DUPLICATES = ("keep_first", "quarantine_all")
MAX_ID_LENGTH = 1_000_000   # --max-id-length at most this: a limit is there to bound a row's cost


def check_choice(name: str, value, choices) -> None:
    """``value`` one of the fixed ``choices`` of option ``name`` (gate, duplicates): UsageError otherwise (the
    CLI's parser refuses such a value before this runs)."""
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def check_id_length(value) -> int:
    """--max-id-length as a whole number in 1..MAX_ID_LENGTH (UsageError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID_LENGTH:
        raise UsageError(f"--max-id-length must be a whole number in 1..{MAX_ID_LENGTH:,}; got {value!r}")
    return value


def gate_config(mode: str = "enforce", *, ge_row_sample: int = 0, seed: int = 0, **options):
    """The GateConfig of gate ``mode`` (enforce|report|off) and the gate's ``options`` (GATE_DEFAULTS for those not
    given), each checked: UsageError naming the flag on a bad value; a value of the wrong type (text for a number)
    raises TypeError. ``ge_row_sample`` and ``seed`` are the job's."""
    from ..checks import assumptions as A
    from ..checks.rules import RuleConfig
    from .common import GATE_MODES, GateConfig

    unknown = sorted(set(options) - set(GATE_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown gate option(s) {', '.join(unknown)}")
    o = {**GATE_DEFAULTS, **options}
    check_choice("gate", mode, GATE_MODES)
    check_choice("duplicates", o["duplicates"], DUPLICATES)
    for flag, key in (("--max-quarantine-share", "max_quarantine_share"), ("--reward-min", "reward_min"),
                      ("--reward-max", "reward_max"), ("--cramers-v-max", "cramers_v_max")):
        if not math.isfinite(o[key]):
            raise UsageError(f"{flag} must be finite, got {o[key]}")
    if not 0 <= o["max_quarantine_share"] <= 1:
        raise UsageError("--max-quarantine-share must be in [0, 1]")
    if o["reward_max"] <= o["reward_min"]:
        raise UsageError(f"--reward-max ({o['reward_max']}) must be above --reward-min ({o['reward_min']})")
    if not 0 < o["cramers_v_max"] <= 1:
        raise UsageError(f"--cramers-v-max expects a number in (0, 1], got {o['cramers_v_max']}")
    if not 1 <= o["max_slots"] <= 4096:
        raise UsageError(f"--max-slots must be in 1..4096, got {o['max_slots']}")
    check_id_length(o["max_id_length"])
    try:
        A.parse_calibration_scope(o["calibration_scope"])
    except ValueError as exc:
        raise UsageError(f"--calibration-scope: {exc}") from None
    rules = RuleConfig(reward_min=o["reward_min"], reward_max=o["reward_max"],
                       quarantine_null_propensity=o["quarantine_null_propensity"], duplicates=o["duplicates"],
                       require_full_slates=o["require_full_slates"], max_slots=o["max_slots"],
                       max_id_length=o["max_id_length"])
    assumptions = dataclasses.replace(A.AssumptionConfig(), cramers_v_max=o["cramers_v_max"],
                                      calibration_scope=o["calibration_scope"])
    return GateConfig(rules=rules, assumptions=assumptions, max_quarantine_share=o["max_quarantine_share"],
                      mode=mode, great_expectations=bool(o["great_expectations"]), ge_row_sample=ge_row_sample,
                      seed=seed)


def check_adc_option(adc: str | None, method: str, table=None) -> None:
    """--adc with --adc-method, for evaluate and train alike (UsageError, exit 2): with estimated ADCs a method
    ``scavenger adc`` estimates; with --adc PATH a readable ADC table that holds ``method`` with one positive
    coefficient per position 1..n (``table``: that table, already read). ADC numbers (train's --adc 1,0.6,...) are
    parsed where they are used."""
    from ..estimators.adc_table import check_adc_method_rows
    from ..estimators.attention_decay import METHODS

    if adc in (None, "", "estimate"):
        if method not in METHODS:
            raise UsageError(f"--adc-method must be one of {', '.join(METHODS)} when ADCs are estimated; got "
                             f"{method!r}")
        return
    from ..estimators.adc_family import read_adc_table

    table = read_adc_table(adc) if table is None else table
    held = sorted(str(m) for m in table["method"].dropna().unique())
    if method not in held:
        raise UsageError(f"--adc-method {method!r}: the ADC table {adc} holds the method(s) {', '.join(held)}")
    check_adc_method_rows(adc, method, table[table["method"].astype(str) == method])


def parse_checks(checks, flag: str = "--checks") -> tuple | None:
    """``checks`` ("a,b", or a sequence of letters) as sorted check letters; an unknown one is UsageError naming it,
    with the letter meant when it reads like a check's name (``support`` -> c) or a letter's neighbour."""
    import difflib

    from ..checks.verdict import ALL_CHECKS, CHECK_NAMES

    if checks is None:
        return None
    items = checks.split(",") if isinstance(checks, str) else list(checks)
    wanted = tuple(sorted({str(t).strip().lower() for t in items if str(t).strip()}))
    bad = [t for t in wanted if t not in ALL_CHECKS]
    if not bad:
        return wanted or None
    by_name = {name: letter for letter, name in CHECK_NAMES.items()}
    hints = []
    for t in bad:
        close = [n for n in by_name if t in n.split()] or difflib.get_close_matches(t, list(by_name), n=2, cutoff=0.6)
        hints.append(f"{t!r}" + (f" (did you mean {' or '.join(f'{by_name[n]} ({n})' for n in close)}?)"
                                 if close else ""))
    raise UsageError(f"{flag} expects letters from {','.join(ALL_CHECKS)} (" +
                     ", ".join(f"{k} {v}" for k, v in CHECK_NAMES.items()) + f"); got {', '.join(hints)}")
