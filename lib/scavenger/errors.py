"""Exceptions that map to the job exit codes of DEVELOPERS.md.

0 ok, 1 internal error, 2 bad arguments or config, 3 a data check failed.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_DATA_CHECK = 3


class ScavengerError(Exception):
    """Base class; ``exit_code`` is what the CLI returns."""

    exit_code = EXIT_INTERNAL


class UsageError(ScavengerError):
    """Bad arguments or configuration: a wrong path, a malformed flag, an unknown table (exit 2)."""

    exit_code = EXIT_USAGE


class ContractError(ScavengerError):
    """Input data does not have the columns/types of the contract in ``schemas/`` (exit 3)."""

    exit_code = EXIT_DATA_CHECK


class DataCheckFailed(ScavengerError):
    """A data-quality or statistical-assumption gate failed (exit 3)."""

    exit_code = EXIT_DATA_CHECK

    def __init__(self, message: str, verdicts=None, counts=None):
        super().__init__(message)
        self.verdicts = verdicts or []
        self.counts = counts or {}          # the window's row counts when the rows were read (result.json counts)
