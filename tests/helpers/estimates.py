"""Running the registry's estimators on a window's statistics, as the evaluate pipeline does, for the tests that
look at one family's rows."""
from __future__ import annotations

from scavenger.estimators.declaration import EstimateOptions
from scavenger.pipelines.estimate_rows import run_estimators

INTERVALS = {}


def estimate_rows(stats, policies, names, options, derived=(), named=None, adc=None) -> list[dict]:
    """Rows of ``names`` for ``policies``; ``options``: an EvaluateOptions (or any object with its attributes);
    ``adc``: an estimators.adc_family.AdcContext to use instead of resolving the ADC from the window."""
    opts = EstimateOptions(options, getattr(stats, "window", ""), derived=derived,
                           named=set(names) if named is None else named)
    if adc is not None:
        adc.options = opts
        opts.cached("adc", lambda: adc)
    return run_estimators(stats, list(policies), list(names), opts)


def interval_of(name: str):
    """The interval function the slate family's declaration of ``name`` uses."""
    from scavenger.estimators.intervals import design_t_interval, weight_interval

    return weight_interval if name in ("slate_ips", "slate_snips") else design_t_interval


def all_slate_estimates(m, level: float = 0.95, prior_mean=None, alpha=None) -> list:
    """The six slate estimators of the moments ``m`` in the family's order (IPS, SNIPS, PI, wPI, PI++, pi_beta)."""
    from scavenger.estimators import slate as S

    return [S.ips(m, level), S.snips(m, level), S.pi(m, level), S.wpi(m, level),
            S.pi_plus_plus(m, prior_mean, alpha, level), S.pi_beta(m, level)]


def note_lift(note: str) -> tuple[float, float]:
    """The re-ordering's lift over the logged order and its std error, from the reorder row's note (a ratio is no
    value per event, so the estimates table carries it there): printed to 6 and 3 significant digits."""
    import re

    m = re.search(r"lift over the logged order (\S+) \(std error (\S+)\)", str(note))
    assert m, note
    return float(m.group(1)), float(m.group(2))
