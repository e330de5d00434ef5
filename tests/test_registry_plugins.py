"""A third-party estimator through the entry-point group ``scavenger.estimators``: the plugin of docs/extending.md,
installed as a distribution on sys.path, appears in the registry, in ``evaluate --help``, in the estimates table
with the gate's verdicts and the pipeline's CLT interval; plugins load lazily; a broken one is left out."""
from __future__ import annotations

import importlib
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import scavenger
from scavenger import registry
from scavenger.estimators.declaration import Estimator

REPO = Path(__file__).resolve().parents[1]


def _install(site: Path, module: str, source: str, entries: dict) -> None:
    """A distribution ``module`` on ``site``: its module file and the dist-info importlib.metadata reads."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[scavenger.estimators]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """docs/extending.md's plugin, copied verbatim, and a broken one beside it."""
    doc = (REPO / "docs" / "extending.md").read_text()
    source = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    site = tmp_path_factory.mktemp("site")
    _install(site, "my_estimators", source, {"ips_clt": "my_estimators:ESTIMATOR"})
    _install(site, "broken_plugin", "raise RuntimeError('this plugin is broken')\n",
             {"broken": "broken_plugin:ESTIMATOR"})
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    registry.reload()
    yield site
    sys.path.remove(str(site))
    importlib.invalidate_caches()
    registry.reload()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = tmp_path_factory.mktemp("plugin") / "gen"
    cfg = GeneratorConfig(layout="slotted", logging="uniform", n_positions=2, n_ads=4, n_contexts=3, days=2,
                          events_per_day=800, seed=11)
    generate("duckdb", cfg, str(out))
    return out


def test_the_plugin_is_in_the_registry_and_a_broken_one_is_left_out(plugin_site, capsys):
    assert "ips_clt" in registry.names() and registry.get("ips_clt").checks == ("b", "c", "d", "e")
    assert "ips_clt" not in registry.resolve(None)                  # default=False: run when named
    assert any(line.startswith("ips_clt: mean(r W) with a CLT interval") for line in registry.help_lines())
    assert "broken" not in registry.names()
    assert "this plugin is broken" in capsys.readouterr().err


def test_the_plugin_runs_with_the_gate_and_a_clt_interval(plugin_site, generated):
    res = scavenger.evaluate(str(generated / "logs"), str(generated / "decisions"),
                             estimators=["ips_clt", "slate_ips"], gate="enforce", engine="duckdb")
    est = res.to_pandas()
    mine = est[est["estimator"] == "ips_clt"].set_index("policy_id")
    ips = est[est["estimator"] == "slate_ips"].set_index("policy_id")
    assert len(mine) == len(ips) > 0
    z = 1.959963984540054
    for p, r in mine.iterrows():
        assert r["checks"] == ips.loc[p, "checks"] and r["checks"].startswith("b:")
        if not ips.loc[p, "identified"]:
            continue
        assert r["identified"] and r["interval_kind"] == "clt"
        assert math.isclose(r["value"], ips.loc[p, "value"], rel_tol=1e-12)          # the same mean(r W)
        assert math.isclose(r["ci_low"], r["value"] - z * r["std_error"], rel_tol=1e-9)
        assert math.isclose(r["ci_high"], r["value"] + z * r["std_error"], rel_tol=1e-9)


def test_help_lists_the_plugin_and_other_commands_do_not_load_it(plugin_site):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), *sys.path])}
    exe = Path(sys.executable).with_name("scavenger")
    helped = subprocess.run([str(exe), "evaluate", "--help"], env=env, capture_output=True, text=True)
    assert helped.returncode == 0 and "ips_clt" in helped.stdout and "this plugin is broken" in helped.stderr
    top = subprocess.run([str(exe), "--help"], env=env, capture_output=True, text=True)
    assert top.returncode == 0 and "this plugin is broken" not in top.stderr        # no plugin loaded
    gen = subprocess.run([str(exe), "generate", "--days", "0"], env=env, capture_output=True, text=True)
    assert gen.returncode == 2 and "this plugin is broken" not in gen.stderr


def test_a_declaration_needs_only_name_summary_and_estimate():
    e = Estimator(name="x", summary="s", estimate=lambda stats, p, o: {"value": 1.0, "std_error": 0.1})
    assert e.tables == () and e.checks == () and e.default and e.names() == ("x",)
    with pytest.raises(TypeError):
        Estimator("x", "s", lambda *a: None)           # keywords only
    with pytest.raises(ValueError):
        Estimator(name="Bad Name", summary="s", estimate=print)


def test_the_pipeline_completes_and_checks_an_answer():
    from scavenger.pipelines.estimate_rows import complete

    spec = Estimator(name="x", summary="s", estimate=print, outputs=("x_alt",))
    row, = complete(spec, "p", {"value": 0.5, "std_error": 0.1, "note": "hi"}, 0.9, n_events=7)
    assert row["identified"] and row["interval_kind"] == "clt" and row["n_events"] == 7 and row["note"] == "hi"
    assert math.isclose(row["ci_high"] - row["value"], 1.6448536269514722 * 0.1, rel_tol=1e-9)
    no, = complete(spec, "p", {"value": None, "std_error": None, "reason": "too few"}, 0.9)
    assert not no["identified"] and no["reason"] == "too few" and pd.isna(no["value"])
    own, = complete(spec, "p", {"value": 0.5, "std_error": 0.1, "ci_low": 0.1, "ci_high": 0.6,
                                "interval_kind": "el", "estimator": "x_alt"}, 0.95)
    assert (own["estimator"], own["ci_low"], own["interval_kind"]) == ("x_alt", 0.1, "el")
    with pytest.raises(ValueError, match="outputs"):
        complete(spec, "p", {"value": 1.0, "std_error": 0.1, "estimator": "other"}, 0.95)
    with pytest.raises(ValueError, match="unknown key"):
        complete(spec, "p", {"value": 1.0, "std_error": 0.1, "wat": 1}, 0.95)
