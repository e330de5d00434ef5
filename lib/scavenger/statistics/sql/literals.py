"""User text inside a statement (a run id, a context-map key, a policy id): always data, never SQL.

Spark reads backslash escapes and ``${...}`` variables in its SQL text, and sqlglot reads Spark's doubled quotes
differently from Spark, so quoting alone does not carry every string through both engines intact. Text of plain
characters stays a readable literal; any other text is written as its UTF-8 bytes in hex, decoded by the engine
(hex digits hold no quote, backslash or variable, whatever the text held).
"""
from __future__ import annotations

import re

_PLAIN = re.compile(r"[A-Za-z0-9_.:+\- ]*")


def text(value) -> str:
    """A Spark SQL expression whose value is the string ``value``: ``'value'`` when it holds only letters, digits,
    spaces and ``_.:+-``; else ``decode(unhex('<utf-8 hex>'), 'UTF-8')``."""
    value = str(value)
    if _PLAIN.fullmatch(value):
        return f"'{value}'"
    return f"decode(unhex('{value.encode('utf-8').hex().upper()}'), 'UTF-8')"
