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


def did_you_mean(name, choices) -> str:
    """' (did you mean 'x' or 'y'?)' naming the choices close to ``name`` (difflib), else ''."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


class UsageError(ScavengerError):
    """Bad arguments or configuration: a wrong path, a malformed flag, an unknown table (exit 2). A message of the
    form "... must be one of A, B, C ...; got 'x'" is given the close choices: " (did you mean 'A'?)"."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str = "", *args):
        import re

        m = re.search(r"must be one of ([\w., -]+?)(?: when [^;,]*)?[;,] got '([^']*)'", str(message))
        if m and "did you mean" not in str(message):
            message = f"{message}{did_you_mean(m.group(2), [c.strip() for c in m.group(1).split(',')])}"
        super().__init__(message, *args)


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


class DataCheckWarning(UserWarning):
    """The notebook API's word where the command line warns, or refuses with exit 3 while the API still returns
    its result (``scavenger.validate`` with a failed check): the same message. Turn it into an error with
    ``warnings.simplefilter("error", DataCheckWarning)``."""
