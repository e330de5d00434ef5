"""One source, two dialects: the statistics are Spark SQL; DuckDB's statements are generated from them by sqlglot.

``to_duckdb(sql)`` parses a Spark SQL statement and writes it in DuckDB's dialect, with the few rules sqlglot does
not apply itself (below). A statement that does not translate raises :class:`TranslationError` naming it; there is
no fallback and no statement is ever written twice by hand (tests/test_engines.py translates and runs every one).

Rules the statements follow so that both engines give the same numbers (Spark 4 runs with ANSI mode on):
- ``try_divide``, ``try_element_at`` and ``try_cast`` where a value may be missing (never an error on one row);
- no ``exists``/``stack``/``pmod``/``xxhash64`` (not in DuckDB) and no ``array.field`` projections: ``transform``;
- integer sums are cast to BIGINT (DuckDB sums integers as HUGEINT);
- hashes that must agree across engines are built from ``md5`` (the same hex text in both); ``hash`` (Spark's
  32-bit murmur3, DuckDB's 64-bit hash) only narrows rows whose exact keys are then compared.

One rewrite is for speed alone: ``explode`` of an array written out element by element, in a plain select over
one table, becomes one select per element joined by UNION ALL in DuckDB (:func:`_explode_union`), the same rows
without a list built per row. Spark keeps the explode.
"""
from __future__ import annotations

import threading
from functools import lru_cache

SQLGLOT_TESTED = "30.30.0"
DUCKDB_TESTED = "2.0.1"

_FORBIDDEN = {"xxhash64": "md5", "stack": "explode(array(named_struct(...)))", "pmod": "%"}


# sqlglot is not thread-safe on first use: a statement translated on the prepare thread (engines/duck.py) while the
# main thread translated another came out now and then in sqlglot's generic dialect (`JSON_FORMAT(context)`, which
# DuckDB has not: an internal error in 1 of 30 cold runs; 30% of fresh processes translating on four threads). The
# first translation of the process runs alone (0 of 46 such processes after it); the later ones run side by side
# (one lock around every translation starved the main thread behind the prepare thread's queue: 8 policies +4.5 s).
_FIRST_USE = threading.Lock()
_warm = False


def _first_use() -> None:
    """Translate one statement alone, once per process, before any two threads translate at once."""
    global _warm
    with _FIRST_USE:
        if not _warm:
            _to_duckdb("SELECT to_json(map('k', 'v')) AS x FROM t", "first use")
            _warm = True


class TranslationError(RuntimeError):
    """A Spark SQL statement sqlglot cannot write as DuckDB SQL (names the statement)."""


def _forbidden(tree) -> list[str]:
    from sqlglot import exp

    found = []
    for node in tree.find_all(exp.Anonymous, exp.Func):
        name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
        if name in _FORBIDDEN:
            found.append(f"{name} (use {_FORBIDDEN[name]})")
    for node in tree.find_all(exp.Exists):
        if node.args.get("expression") is not None or not isinstance(node.this, exp.Subquery):
            found.append("exists(array, lambda) (use size(filter(...)) > 0)")
    return found


def _rules(node):
    """Spellings sqlglot leaves to us: ``conv(x, 16, 10)`` (hex text to decimal text) is
    ``CAST(CAST('0x' || x AS BIGINT) AS VARCHAR)`` in DuckDB, and cast to a number ``CAST('0x' || x AS BIGINT)``
    (then the number's type) with no text in between; the index of ``transform(arr, (x, i) -> ...)``
    counts from 0 in Spark and from 1 in DuckDB; ``unix_seconds`` truncates in Spark (floor of the epoch);
    ``from_json(text, 'type')`` is a cast of JSON and ``timestamp_micros`` is ``make_timestamptz``."""
    from sqlglot import exp

    if isinstance(node, exp.Transform) and isinstance(node.expression, exp.Lambda) \
            and len(node.expression.expressions) == 2:
        index = node.expression.expressions[1].name
        body = node.expression.this.transform(
            lambda n: exp.Paren(this=exp.Sub(this=n.copy(), expression=exp.Literal.number(1)))
            if isinstance(n, (exp.Identifier, exp.Column)) and n.name == index and not n.find_ancestor(exp.Dot)
            and (not isinstance(n, exp.Identifier) or not isinstance(n.parent, exp.Column)) else n)
        node.expression.set("this", body)
        return node
    if isinstance(node, exp.UnixSeconds):
        # Spark truncates to whole seconds; sqlglot's CAST(EPOCH(ts) AS BIGINT) rounds (23:59:59.7 -> next day)
        return exp.Cast(this=exp.Floor(this=exp.Anonymous(this="EPOCH", expressions=[node.this.copy()])),
                        to=exp.DataType.build("BIGINT"))
    if isinstance(node, exp.FromJson) and isinstance(node.expression, exp.Literal):
        # from_json(text, 'spark type') -> CAST(CAST(text AS JSON) AS <type>): a constant text folds to a constant
        to = exp.DataType.build(node.expression.name, dialect="spark")
        return exp.Cast(this=exp.Cast(this=node.this.copy(), to=exp.DataType.build("JSON")), to=to)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "timestamp_micros" and len(node.expressions) == 1:
        return exp.Anonymous(this="MAKE_TIMESTAMPTZ", expressions=[node.expressions[0].copy()])
    if isinstance(node, exp.Cast) and _hex_conv(node.this) is not None \
            and node.to.this in exp.DataType.NUMERIC_TYPES:
        # CAST(conv(x, 16, 10) AS <number>): the hex text straight to BIGINT (no text in between), then the type
        number = _hex_bigint(_hex_conv(node.this))
        return number if node.to.this == exp.DataType.Type.BIGINT else exp.Cast(this=number, to=node.to.copy())
    if _hex_conv(node) is not None:
        return exp.Cast(this=_hex_bigint(_hex_conv(node)), to=exp.DataType.build("VARCHAR"))
    return node


def _hex_conv(node):
    """x of ``conv(x, 16, 10)`` (hex text to decimal text), else None."""
    from sqlglot import exp

    if isinstance(node, exp.Anonymous) and node.name.lower() == "conv":
        args = node.expressions
        if len(args) == 3 and args[1].name == "16" and args[2].name == "10":
            return args[0]
    return None


def _hex_bigint(text):
    """DuckDB's BIGINT of hex text: CAST('0x' || text AS BIGINT)."""
    from sqlglot import exp

    return exp.Cast(this=exp.DPipe(this=exp.Literal.string("0x"), expression=text.copy()),
                    to=exp.DataType.build("BIGINT"))


def _explode_branches(value):
    """The rows of ``explode(value)`` as branches (element, row condition, explode it?) when ``value`` is an array
    written out, ``array(e1..en)``, or ``CASE WHEN c THEN array(e..) ELSE <list> END`` (the held-slots shape: the
    ELSE list is ``concat(array(e..), tail)``, the same elements and then a tail); otherwise None."""
    from sqlglot import exp

    if isinstance(value, exp.Array) and value.expressions:
        return [(e, None, False) for e in value.expressions]
    if not (isinstance(value, exp.Case) and len(value.args.get("ifs") or []) == 1 and value.args.get("default")
            and value.this is None):
        return None
    when, other = value.args["ifs"][0], value.args["default"]
    head = when.args.get("true")
    if not (isinstance(head, exp.Array) and head.expressions):
        return None
    taken = exp.Coalesce(this=exp.Paren(this=when.this.copy()), expressions=[exp.false()])
    if isinstance(other, exp.Concat) and len(other.expressions) == 2 and other.expressions[0] == head:
        return [(e, None, False) for e in head.expressions] + [(other.expressions[1], exp.not_(taken), True)]
    return [(e, taken, False) for e in head.expressions] + [(other, exp.not_(taken.copy()), True)]


def _explode_union(select):
    """``SELECT cols, explode(<array written out>) AS s FROM t [WHERE w]`` as one SELECT per element, UNION ALL:
    DuckDB builds no list per row (4M events, K = 3: ad_position 0.63 -> 0.43 s, the pair cells 0.9 -> 0.56 s).
    Only a plain select over one whole table: a subquery would be computed once per branch, and a filter evaluated
    once per branch (factored's rows with a reward: 0.38 -> 0.57 s). None when it does not apply."""
    from sqlglot import exp

    if not isinstance(select, exp.Select) or any(select.args.get(k) for k in (
            "joins", "laterals", "group", "having", "qualify", "order", "limit", "offset", "distinct", "windows",
            "with", "where")):
        return None
    source = select.args.get("from_") or select.args.get("from")
    if not (isinstance(source, exp.From) and isinstance(source.this, exp.Table)):
        return None
    found = [(i, p) for i, p in enumerate(select.expressions)
             if isinstance(p, exp.Alias) and isinstance(p.this, (exp.Explode, exp.Unnest))]
    if len(found) != 1 or len(list(select.find_all(exp.Explode, exp.Unnest, exp.Posexplode))) != 1:
        return None
    i, projection = found[0]
    branches = _explode_branches(projection.this.this)
    if branches is None:
        return None
    parts = []
    projection.set("this", exp.Null())     # each branch copies the select without the array: a copy per element of
    for value, condition, explode in branches:   # the whole array was K^2 (K = 32: 31 s of deepcopy per run)
        part = select.copy()
        value = exp.Explode(this=value) if explode else value
        part.expressions[i].set("this", value)
        if condition is not None:
            part = part.where(condition.copy(), copy=False)
        parts.append(part)
    out = parts[0]
    for part in parts[1:]:
        out = exp.union(out, part, distinct=False, copy=False)
    return out


def _explodes_as_unions(tree):
    """Every select that :func:`_explode_union` applies to, rewritten (innermost first)."""
    from sqlglot import exp

    for select in reversed(list(tree.find_all(exp.Select))):
        union = _explode_union(select)
        if union is None:
            continue
        if select is tree:
            tree = union
        else:
            select.replace(union)
    return tree


@lru_cache(maxsize=4096)
def to_duckdb(sql: str, name: str = "statement") -> str:
    """The DuckDB text of a Spark SQL statement; TranslationError (with ``name``) when it cannot be translated."""
    if not _warm:
        _first_use()
    return _to_duckdb(sql, name)


def _to_duckdb(sql: str, name: str) -> str:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except SqlglotError as exc:
        raise TranslationError(f"statement {name!r} does not parse as Spark SQL: {exc}") from None
    bad = _forbidden(tree)
    if bad:
        raise TranslationError(f"statement {name!r} uses {', '.join(sorted(set(bad)))}: no DuckDB equivalent")
    tree = tree.transform(_rules, copy=False)   # the tree is ours: no deep copy (a fifth of the time)
    tree = _explodes_as_unions(tree)
    try:
        return tree.sql(dialect="duckdb", copy=False)      # ours too: the generator's deep copy was K^2 again
    except SqlglotError as exc:
        raise TranslationError(f"statement {name!r} does not translate to DuckDB: {exc}") from None


__all__ = ["to_duckdb", "TranslationError", "SQLGLOT_TESTED", "DUCKDB_TESTED"]
