"""scavenger: off-policy evaluation of ad/recommendation slates from impression logs, on DuckDB or Spark.

Seeds: exploration scavenging and attention-decay coefficients (Langford, Strehl, Wortman, ICML 2008),
slate OPE under Bayes risk (Vlassis, Amat Gil, Chandrashekar), choosing m ads from n candidates (Langford 2010).
"""
__version__ = "0.1.0"

# Notebook API (issue 9): ``scavenger.adc(logs)``, ``scavenger.evaluate(logs, decisions)``, ``scavenger.validate(...)``
# and the submodules ``scavenger.obd`` / ``scavenger.report``, imported lazily so that ``import scavenger`` stays
# cheap (no pandas/pyspark) for the CLI and the Airflow DAG modules.
_API = ("adc", "evaluate", "validate", "train", "Result", "AdcResult", "EvaluationResult", "ValidationResult",
        "TrainResult")
_SUBMODULES = ("api", "obd", "report", "progress", "contract", "session", "registry", "pipelines", "engines")


def __getattr__(name):
    import importlib

    if name in _API:
        return getattr(importlib.import_module(".api", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'scavenger' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API) | set(_SUBMODULES))
