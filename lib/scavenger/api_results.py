"""What the notebook API returns (scavenger.api): each job's table as pandas, the other tables one attribute away
(``estimates``, ``diagnostics``, ``adc``, ``by_day``, ``validation``, ``policies``), and as repr the summary the
command line prints (run_summary.py), at most 4,000 characters: typing a result in a notebook shows a page, not
every internal statistic."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Result", "AdcResult", "EvaluationResult", "ValidationResult", "TrainResult"]


@dataclass(repr=False)
class Result:
    """A job's output table as pandas (``pandas``/``to_pandas()``), with a Spark DataFrame view when Spark ran. Its
    repr is the summary the CLI prints (run_summary.py, at most 4,000 characters), naming the attributes
    that hold the full tables."""

    pandas: pd.DataFrame
    summary: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    _ran_on: object = field(default=None, repr=False)     # the engine (closed): its user_table()
    _run: object = field(default=None, repr=False)        # the RunResult the CLI would have written (repr)
    _TABLES = ("pandas",)                                 # the attributes the repr points to

    def __repr__(self) -> str:
        from .run_summary import summary_text

        shown = []
        for name in self._TABLES:
            value = getattr(self, name, None)
            if value is not None and hasattr(value, "__len__"):
                shown.append(f".{name} ({len(value):,} rows)" if isinstance(value, pd.DataFrame) else f".{name}")
        tables = "full tables: " + ", ".join(shown) + "; .summary, .to_pandas()"
        if self._run is None:
            return f"<{type(self).__name__}> " + tables
        return summary_text(self._run, tables)

    def to_pandas(self) -> pd.DataFrame:
        return self.pandas.copy()

    @property
    def table(self):
        """The table as a Spark DataFrame when the Spark engine ran, else the pandas frame."""
        if self._ran_on is None:
            return self.pandas
        return self._ran_on.user_table(self.pandas)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}</pre>"


@dataclass(repr=False)
class AdcResult(Result):
    by_day: pd.DataFrame | None = None
    verdicts: list = field(default_factory=list)
    _TABLES = ("adc", "by_day")

    @property
    def adc(self) -> pd.DataFrame:
        """The ADC table (method x position), as ``scavenger adc`` writes OUT/adc/."""
        return self.pandas

    def plot(self, true_adc=None):
        from .report import figures

        return figures.adc_figure(self.pandas, "delta", true_adc)


@dataclass(repr=False)
class EvaluationResult(Result):
    diagnostics_pandas: pd.DataFrame | None = None
    adc_pandas: pd.DataFrame | None = None
    by_day: pd.DataFrame | None = None
    verdicts: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    stats: object = None
    differences: pd.DataFrame | None = None    # baseline=: each target minus the baseline (pipelines/running.py)
    running: pd.DataFrame | None = None        # by_day: each estimate over the first day through each day
    _TABLES = ("estimates", "diagnostics", "adc", "by_day", "differences", "running")

    @property
    def estimates(self) -> pd.DataFrame:
        """The estimates table (OUT/estimates/ of ``scavenger evaluate``)."""
        return self.pandas

    @property
    def diagnostics(self) -> pd.DataFrame | None:
        return self.diagnostics_pandas

    @property
    def adc(self) -> pd.DataFrame | None:
        return self.adc_pandas

    def plot(self, policy_id: str | None = None):
        """Forest plot (one row per estimator with its interval, the logged value as reference) of a policy."""
        from .report import figures
        from .report.build import OFF_SCALE, diag_value

        est = self.pandas
        policy_id = policy_id or est["policy_id"].iloc[0]
        rows = est[(est["policy_id"] == policy_id) & ~est["estimator"].isin(OFF_SCALE) & est["identified"]]
        logged = diag_value(self.diagnostics_pandas, policy_id, "logged_value")
        return figures.forest_figure(rows, policy_id, logged, "logged mean reward")


@dataclass(repr=False)
class ValidationResult(Result):
    counts: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    message: str = ""
    _TABLES = ("validation",)

    @property
    def validation(self) -> pd.DataFrame:
        """One row per check and scope (OUT/validation/ of ``scavenger validate``)."""
        return self.pandas

    def raise_if_failed(self) -> None:
        from .errors import DataCheckFailed

        if self.failed:
            raise DataCheckFailed(self.message, verdicts=self.pandas.to_dict("records"))


@dataclass(repr=False)
class TrainResult(Result):
    """One row per learned policy (value estimate and, on generator logs, the truth); ``summary`` as result.json."""

    decisions: str = ""
    _TABLES = ("policies",)

    @property
    def policies(self) -> pd.DataFrame:
        return self.pandas
