"""Imports the estimators need, started in a background thread while the engine scans the logs.

DuckDB and Spark release the GIL while they work, so importing scipy.special and the estimator modules overlaps the
scan instead of following it (scipy.stats and scipy.optimize are not needed: estimators/distributions.py). An import that fails here is ignored: the main thread's own
import of the same module raises it where it is used.
"""
from __future__ import annotations

import importlib
import threading

ESTIMATOR_MODULES = ("scipy.special", "scavenger.estimators.intervals", "scavenger.estimators.attention_decay",
                     "scavenger.estimators.slate", "scavenger.estimators.factored", "scavenger.checks.vector",
                     "scavenger.estimators.slate_family", "scavenger.estimators.adc_family",
                     "scavenger.estimators.scavenging_family")


def prefetch(modules=ESTIMATOR_MODULES) -> threading.Thread:
    def run():
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - see the module doc
                pass

    thread = threading.Thread(target=run, name="scavenger-prefetch", daemon=True)
    thread.start()
    return thread
