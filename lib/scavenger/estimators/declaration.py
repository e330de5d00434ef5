"""What an estimator is to the pipeline: one :class:`Estimator` declaration, and the :class:`EstimateOptions` its
function is given. Built-in families and third-party plugins declare theirs the same way; the registry collects
them, and the pipeline runs them (pipelines/estimate_rows.py completes their rows: interval, identification,
gate verdicts, the recommended flag).

    def estimate(stats, policy_id, options):          # stats: the window's merged tables (stats.table(name))
        t = stats.table("slate_moments")
        ...
        return {"value": v, "std_error": se}           # the pipeline adds a CLT interval at options.level

    ESTIMATOR = Estimator(name="my_estimator", summary="mean(r W) (seed 002 eq. 2)", estimate=estimate,
                          tables=("slate_moments",), checks=("b", "c"))

``estimate`` returns a dict or a list of dicts. Keys: ``value`` and ``std_error`` (required; NaN or None where
there is none), optionally ``ci_low``/``ci_high``/``interval_kind`` (an interval of the estimator's own, e.g.
empirical likelihood), ``n_events``, ``note``, ``reason`` (why no value or no interval), ``identified`` (False:
the data cannot identify the value; ``reason`` says why), ``estimator`` (a variant row's name, one of
``outputs``), and any other column of the estimates table (schemas/estimates.schema.json).
No heavy import here: the registry and the command line read declarations before any engine or pandas is needed.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

UNIT_EVENT = "event"   # every value of the estimates table: expected reward per logged event (see its schema)


@dataclass(frozen=True, kw_only=True)
class Estimator:
    """One estimator's declaration; only ``name``, ``summary`` and ``estimate`` are required."""

    name: str
    summary: str                        # the formula and the seed section, one line
    estimate: Callable[..., Any] | str  # estimate(stats, policy_id, options) -> dict | list[dict]; or "module:attr"
    tables: tuple = ()                  # the per-day statistics tables it reads (statistics/declarations.py)
    checks: tuple = ()                  # the assumption checks (letters a-f) it relies on: a failure gates it
    aliases: tuple = ()
    family: str = ""                    # a group name --estimators accepts (e.g. "slate", "ranking")
    default: bool = True                # in the default set of `evaluate`
    identification: str = ""            # what the data must show: the reason when it gives no value and no reason
    recommend_rank: int = 50            # the recommended estimate: the lowest rank among identified, checked ones
    outputs: tuple = ()                 # names of the variant rows it writes besides its own
    needs_decisions: bool = True        # False: it reads the logs alone
    needs_propensities: bool = False    # True: not run where no logged event carries a propensity
    derived: bool = False               # it also values re-orderings of the logged slate (--reorder policies)
    improves_on: str | None = None      # the estimator whose variance it reduces (the report compares the two)
    predicted_reduction: str | None = None  # a diagnostics metric: its predicted n*MSE reduction over improves_on
    unit: str = UNIT_EVENT
    difference: Callable[..., Any] | str | None = None  # difference(stats, policy_id, baseline_id, options) -> the
    #                                   row of target minus baseline on the same events (evaluate --baseline)
    windows: Callable[..., Any] | str | None = None  # windows(stats, options, kind): before --by-day's windows
    #                                   (kind "by_day") or running/'s prefixes ("running") run in worker processes
    #                                   without the engine, put in options.shared what they read from it

    def __post_init__(self):
        for attr in ("tables", "checks", "aliases", "outputs"):
            value = getattr(self, attr)
            if isinstance(value, str):
                object.__setattr__(self, attr, (value,))
            else:
                object.__setattr__(self, attr, tuple(value))
        if not (isinstance(self.name, str) and self.name.isidentifier() and self.name == self.name.lower()):
            raise ValueError(f"an estimator's name is a lower-case identifier, not {self.name!r}")
        if self.unit != UNIT_EVENT:
            raise ValueError(f"{self.name}: every estimate is a value per logged event (unit {UNIT_EVENT!r}); "
                             f"convert, or write the value as a diagnostic instead")

    @property
    def function(self) -> Callable:
        """The estimate function (a "module:attr" reference imported on first use)."""
        return _imported(self.estimate)

    @property
    def difference_function(self) -> Callable:
        return _imported(self.difference)

    @property
    def windows_function(self) -> Callable | None:
        return _imported(self.windows) if self.windows is not None else None

    def names(self) -> tuple:
        """Every estimator column value its rows may hold."""
        return (self.name, *self.outputs)


def _imported(fn):
    """A declared function, or a "module:attr" reference imported now."""
    if isinstance(fn, str):
        module, _, attr = fn.partition(":")
        fn = getattr(importlib.import_module(module), attr)
    return fn


class EstimateOptions:
    """What an estimate function is given besides the statistics: the run's options (``level``, ``prior_mean``,
    ``adc``, ... of pipelines.evaluate.EvaluateOptions, read as attributes), the ``window`` (or ``day``) it
    estimates, and two caches for what several estimators or policies share:
    ``cached(key, fn)`` for this window (or day), ``shared(key, fn)`` for the whole run (every day of --by-day).
    ``side`` collects what a family writes besides estimates (``side["diagnostics"]``: rows of the diagnostics
    table; ``side["adc"]``: the ADC table used)."""

    def __init__(self, options, window: str = "", day=None, parent: "EstimateOptions | None" = None,
                 derived=(), named=(), window_stats=None, upto=None):
        self._options = options
        self.window = window
        self.day = day
        self.upto = upto                     # running/: the last day of the prefix window estimated
        self.window_stats = window_stats     # --by-day: the whole window's statistics beside the day's (prefix's)
        self.derived = frozenset(derived)
        self.named = frozenset(named)
        self._cache: dict = {}
        self._shared: dict = parent._shared if parent is not None else {}
        self.side: dict = {"diagnostics": []}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._options, name)

    @property
    def options(self):
        return self._options

    @property
    def keeps_side(self) -> bool:
        """Whether ``side`` is written: the run's window, not a --by-day window or a running/ prefix (their
        estimates only are kept, so a family may skip what it makes for ``side`` alone)."""
        return self.day is None and self.upto is None

    def cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def shared(self, key, fn):
        if key not in self._shared:
            self._shared[key] = fn()
        return self._shared[key]

    def shared_value(self, key):
        """What ``shared(key, ...)`` holds (None before it was computed)."""
        return self._shared.get(key)

    def for_day(self, day, window: str, window_stats=None) -> "EstimateOptions":
        """The options of one day of a --by-day run: its own ``cached``, the run's ``shared``."""
        return EstimateOptions(self._options, window, day, self, self.derived, self.named, window_stats)

    def for_prefix(self, upto, window: str, window_stats=None) -> "EstimateOptions":
        """The options of running/'s prefix window through ``upto``: its own ``cached`` (as a fresh run over that
        window has), the run's ``shared``."""
        return EstimateOptions(self._options, window, None, self, self.derived, self.named, window_stats, upto)
