"""Values from the data, made safe to show: bounded in length, control characters escaped, HTML-inert.

Logs and decisions come from many writers. Any value of theirs (an ad id, a policy id, a schema's field name) can
reach a message, a log line, result.json, a plot or an HTML page. Every such edge goes through one of these:

    clip(value)          one value: control characters as \\xNN, cut to ``MAX_VALUE`` characters, full length stated
    bound(text)          a message that embeds values: each run of more than ``MAX_VALUE`` characters (between blanks
                         and the punctuation around values) cut like a value, the whole cut to ``MAX_TEXT``
                         characters, control characters escaped
    html_text(value)     ``bound`` then HTML-escaped (quotes too): text for an element or an attribute
    bound_json(obj)      ``bound`` applied to every string of a JSON-able structure (result.json, the manifest)

The cut keeps the first characters and says how long the value was: ``AAAA…[cut: 10485760 chars]``.
"""
from __future__ import annotations

import html
import re

MAX_VALUE = 200      # characters of one value shown
MAX_TEXT = 2000      # characters of one message (a verdict, an error line)

# C0 controls except tab and newline, DEL, C1 controls, and the Unicode line/paragraph separators and bidi
# overrides (which reorder what a terminal or a page shows)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# a run of characters between blanks and the punctuation messages put around values: one value, or a piece of one
_LONG_RUN = re.compile(r"[^\s,;()\[\]{}\"']{%d,}" % (MAX_VALUE + 1))


def _escape_char(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_controls(text: str, keep_newlines: bool = True) -> str:
    """Control characters as ``\\xNN`` (``\\uNNNN`` above 0xff); tab and newline kept unless ``keep_newlines`` is
    False (then every control character, newline included, is escaped)."""
    return (_CONTROL if keep_newlines else _CONTROL_ALL).sub(_escape_char, text)


def _cut(text: str, limit: int, full: int | None = None) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[cut: {full if full is not None else len(text)} chars]"


def clip(value, limit: int = MAX_VALUE) -> str:
    """One value as safe text: ``str(value)``, cut to ``limit`` characters (stating the full length), every control
    character (newline included) escaped. The cut comes first, so a 10 MiB value costs ``limit`` characters of
    work after ``str``."""
    text = "" if value is None else value if isinstance(value, str) else str(value)
    full = len(text)
    return _cut(escape_controls(text[:limit + 1], keep_newlines=False), limit, full) if full > limit else \
        escape_controls(text, keep_newlines=False)


def bound(text, limit: int = MAX_TEXT, value_limit: int = MAX_VALUE) -> str:
    """A message that may embed values: every run of more than ``value_limit`` non-blank characters is cut (its
    length stated), the whole is cut to ``limit`` characters (its length stated), and then control characters
    other than newline and tab are escaped. Short, clean text comes back unchanged."""
    if text is None:
        return text
    if not isinstance(text, str):
        text = str(text)
    full = len(text)
    if full > value_limit and _LONG_RUN.search(text):
        text = _LONG_RUN.sub(lambda m: _cut(m.group(0), value_limit), text)
    if len(text) > limit:
        text = f"{text[:limit]}…[cut: {full} chars]"
    return escape_controls(text) if _CONTROL.search(text) else text


def one_line(text, limit: int = MAX_TEXT) -> str:
    """``bound`` and then the first line only (the CLI's one-line errors)."""
    text = bound(text, limit)
    return text.splitlines()[0] if text and text.strip() else (text or "")


def html_text(value, limit: int = MAX_TEXT) -> str:
    """Text for an HTML element or a quoted attribute: bounded, control characters escaped, HTML-escaped."""
    return html.escape(bound("" if value is None else value, limit), quote=True)


def bound_json(obj, limit: int = MAX_TEXT):
    """Every string (keys included) of a JSON-able structure through :func:`bound`."""
    if isinstance(obj, str):
        return bound(obj, limit)
    if isinstance(obj, dict):
        return {bound(k, limit) if isinstance(k, str) else k: bound_json(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [bound_json(v, limit) for v in obj]
    return obj
