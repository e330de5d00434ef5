"""The layers of lib/scavenger (pyproject.toml [tool.importlinter]) hold, and no two modules import each other, even
through others and inside functions: a regression fails here as well as in `make test`'s lint-imports."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cycles(edges: dict) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle_through_three_modules():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others():
    """Every import counts, at module level or inside a function (grimp reads them all): a cycle names its modules
    and the lines that close it."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("scavenger", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert sum(len(v) for v in edges.values()) > 300          # the whole package was read
    found = _cycles(edges)
    lines = [f"{a} -> {b} (l.{d['line_number']}: {d['line_contents']})"
             for comp in found for a in comp for b in comp if b in edges[a]
             for d in graph.get_import_details(importer=a, imported=b)]
    assert not found, "import cycles:\n" + "\n".join(lines)


def test_lint_imports_keeps_every_contract():
    """`lint-imports` (import-linter, the `test` extra) on pyproject.toml's contracts: the layers, top to bottom,
    and the sealed engine seam."""
    pytest.importorskip("importlinter")
    script = Path(sys.executable).with_name("lint-imports")
    cmd = [str(script)] if script.exists() else [sys.executable, "-c",
                                                 "import sys; from importlinter.cli import lint_imports_command; "
                                                 "sys.exit(lint_imports_command())"]
    run = subprocess.run([*cmd, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 kept, 0 broken" in run.stdout
