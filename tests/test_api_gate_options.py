"""The notebook API's gate keywords and the CLI's gate flags go through one plain check (pipelines/options.py): the
same defaults, the same GateConfig, the same messages; the API builds no argparse parser and loads no CLI module."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from scavenger import api
from scavenger.cli.shared_flags import add_gate_arguments, gate_config
from scavenger.errors import UsageError
from scavenger.pipelines.options import GATE_DEFAULTS


def _cli(argv: list[str]):
    parser = argparse.ArgumentParser()
    add_gate_arguments(parser)
    return gate_config(parser.parse_args(argv))


def test_flag_defaults_are_the_gate_defaults():
    parser = argparse.ArgumentParser()
    add_gate_arguments(parser)
    args = vars(parser.parse_args([]))
    assert {k: args[k] for k in GATE_DEFAULTS if k != "great_expectations"} == \
        {k: v for k, v in GATE_DEFAULTS.items() if k != "great_expectations"}
    assert args["no_great_expectations"] is (not GATE_DEFAULTS["great_expectations"])


@pytest.mark.parametrize("keywords, argv", [
    ({}, []),
    (dict(reward_max=5.0, cramers_v_max=0.2, calibration_scope="context:campaign"),
     ["--reward-max", "5", "--cramers-v-max", "0.2", "--calibration-scope", "context:campaign"]),
    (dict(duplicates="quarantine_all", max_slots=8, require_full_slates=True, quarantine_null_propensity=True,
          great_expectations=False, max_quarantine_share=0.5, reward_min=-1.0),
     ["--duplicates", "quarantine_all", "--max-slots", "8", "--require-full-slates", "--quarantine-null-propensity",
      "--no-great-expectations", "--max-quarantine-share", "0.5", "--reward-min", "-1"]),
])
@pytest.mark.parametrize("mode", ["enforce", "report", "off"])
def test_keywords_make_the_gate_the_flags_make(keywords, argv, mode):
    assert api._gate(mode, **keywords) == _cli(["--gate", mode, *argv])


@pytest.mark.parametrize("keywords, argv, message", [
    (dict(cramers_v_max=3), ["--cramers-v-max", "3"], r"--cramers-v-max expects a number in \(0, 1\], got 3"),
    (dict(reward_max=0.0), ["--reward-max", "0"], r"--reward-max \(0.0\) must be above --reward-min \(0.0\)"),
    (dict(max_quarantine_share=2.0), ["--max-quarantine-share", "2"], r"--max-quarantine-share must be in \[0, 1\]"),
    (dict(reward_max=float("inf")), ["--reward-max", "inf"], "--reward-max must be finite, got inf"),
    (dict(max_slots=0), ["--max-slots", "0"], "--max-slots must be in 1..4096, got 0"),
    (dict(calibration_scope="campaign"), ["--calibration-scope", "campaign"], "--calibration-scope: "),
])
def test_a_bad_value_is_the_same_usage_error(keywords, argv, message):
    with pytest.raises(UsageError, match=message):
        api._gate("enforce", **keywords)
    with pytest.raises(UsageError, match=message):
        _cli(argv)


def test_what_only_keywords_can_get_wrong():
    with pytest.raises(UsageError, match="gate must be one of enforce, report, off, got 'strict'"):
        api._gate("strict")
    with pytest.raises(UsageError, match="unknown gate option"):
        api._gate("enforce", reward_maximum=2.0)
    with pytest.raises(UsageError, match="duplicates must be one of keep_first, quarantine_all, got 'drop'"):
        api._gate("enforce", duplicates="drop")
    with pytest.raises(UsageError, match="gate options: "):
        api._gate("enforce", reward_max="5")
    rules = api._gate("report", seed=7).rules
    assert api._gate("enforce", rules=rules).rules is rules and api._gate("off", seed=7).seed == 7


def test_the_api_gate_loads_no_cli_module():
    code = ("import sys, scavenger.api as a; a._gate('enforce', reward_max=5.0, duplicates='quarantine_all'); "
            "bad = sorted(m for m in sys.modules if m.startswith('scavenger.cli')); "
            "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
