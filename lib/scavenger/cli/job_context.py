"""What a command's ``run`` is given besides its arguments: :class:`JobContext` (the parsed arguments, the
run's result.json record, and the Spark session and engine, each opened on first use and recorded)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from ..result import RunResult


@dataclass
class JobContext:
    args: argparse.Namespace
    result: RunResult
    _spark: object = field(default=None, repr=False)
    _engine: object = field(default=None, repr=False)

    @property
    def spark(self):
        if self._spark is None:
            from ..progress import console_progress_conf
            from ..session import get_spark, parse_conf_pairs

            conf = {**console_progress_conf(), **parse_conf_pairs(getattr(self.args, "conf", None))}
            self._spark = get_spark(app_name=f"scavenger-{self.result.job}",
                                    master=getattr(self.args, "master", None), conf=conf,
                                    quiet=not getattr(self.args, "verbose", False))
        return self._spark

    def engine(self, inputs):
        """The engine for these inputs (--engine and the auto rule), recorded in result.json."""
        if self._engine is None:
            from ..engines import choose, open_engine

            hint = "--master or --conf given" if getattr(self.args, "master", None) or \
                getattr(self.args, "conf", None) else None
            if getattr(self.args, "catalog", None):
                hint = "--catalog given (catalog tables are Spark's)"
            name, why = choose(getattr(self.args, "engine", "auto"), inputs.all(), hint)
            self._engine = open_engine(name, why, spark=self.spark if name == "spark" else None)
            self.result.engine = self._engine.info.to_dict()
            from .shared_flags import check_catalog

            check_catalog(self.args, self, self._engine)
        return self._engine

    def output_engine(self, out: str):
        """The engine of a job that writes ``out`` without reading logs (generate, ingest-obd, demo): --engine and
        the auto rule with the output as the location (DuckDB for a local path), recorded in result.json."""
        if self._engine is None:
            from ..engines import choose_for_output, open_engine

            hint = "--master or --conf given" if getattr(self.args, "master", None) or \
                getattr(self.args, "conf", None) else None
            name, why = choose_for_output(getattr(self.args, "engine", "auto"), out, hint)
            self._engine = open_engine(name, why, spark=self.spark if name == "spark" else None)
            self.result.engine = self._engine.info.to_dict()
        return self._engine

    @property
    def engine_open(self):
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            try:
                self._engine.close()
            except Exception:  # noqa: BLE001 - best effort at the end of a job
                pass

