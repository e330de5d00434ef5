"""The ground-truth log generator (issue 2, item 3): contract, determinism, click model, propensities, truth, CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from scavenger.contract import DECISIONS, LOGS, load_contract, read_decisions, read_logs
from scavenger.simulation import model
from scavenger.simulation.generator import GeneratorConfig, generate, true_policy_value

Z = 4.0  # statistical checks: |empirical - truth| <= Z * standard error


def _gen(spark, tmp_path_factory, name, **kw):
    out = str(tmp_path_factory.mktemp(name))
    cfg = GeneratorConfig(**kw)
    truth = generate(spark, cfg, out)
    return {"out": out, "cfg": cfg.resolved(), "truth": truth,
            "logs": read_logs(spark, f"{out}/logs"), "decisions": read_decisions(spark, f"{out}/decisions")}


@pytest.fixture(scope="module")
def uniform_ranked(spark, tmp_path_factory):
    return _gen(spark, tmp_path_factory, "uniform_ranked", layout="ranked", logging="uniform", n_positions=4,
                n_ads=20, n_contexts=60, days=2, events_per_day=20000, seed=3)


@pytest.fixture(scope="module")
def history_ranked(spark, tmp_path_factory):
    return _gen(spark, tmp_path_factory, "history_ranked", layout="ranked", logging="history", n_positions=3,
                n_ads=12, n_contexts=24, days=3, events_per_day=15000, epsilon=0.3, seed=5)


@pytest.fixture(scope="module")
def multi_slotted(spark, tmp_path_factory):
    return _gen(spark, tmp_path_factory, "multi_slotted", layout="slotted", logging="multi", n_positions=3,
                slot_sizes=[3, 4, 5], n_contexts=36, days=1, events_per_day=20000, seed=11)


def _slots(logs):
    return logs.select(F.col("dt"), F.col("event_id"), F.col("context_id"), F.col("logging_policy"),
                       F.explode(F.col("slots")).alias("s")).select(
        F.col("dt"), F.col("event_id"), F.col("context_id"), F.col("logging_policy"),
        F.col("s.position").alias("position"), F.col("s.ad_id").alias("ad_id"),
        F.col("s.propensity").alias("propensity"), F.col("s.reward").alias("reward"))


def _rates(out):
    return pd.read_parquet(f"{out}/truth/click_rates")


def _p_matrix(rates: pd.DataFrame) -> tuple[np.ndarray, list, list]:
    ctx = sorted(rates["context_id"].unique())
    ads = list(dict.fromkeys(rates.sort_values(["context_index"], kind="stable")["ad_id"]))
    P = rates.pivot(index="context_id", columns="ad_id", values="p").loc[ctx, ads].to_numpy()
    return P, ctx, ads


def _strip(dtype):
    """A Spark type with every nullability flag dropped (compare names and types only)."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, _strip(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(_strip(dtype.elementType), True)
    if isinstance(dtype, MapType):
        return MapType(_strip(dtype.keyType), _strip(dtype.valueType), True)
    return dtype


# ---------------------------------------------------------------------------------------------------- contract


@pytest.mark.parametrize("fixture", ["uniform_ranked", "multi_slotted"])
def test_written_data_conforms_to_contract(request, fixture):
    g = request.getfixturevalue(fixture)
    cfg, logs, decisions = g["cfg"], g["logs"], g["decisions"]
    assert _strip(logs.schema) == _strip(load_contract(LOGS).struct_type())
    assert _strip(decisions.schema) == _strip(load_contract(DECISIONS).struct_type())
    K = cfg.n_positions
    row = logs.select(
        F.count(F.lit(1)).alias("n"),
        F.countDistinct("event_id").alias("distinct_ids"),
        F.sum(F.when(F.col("dt") != F.to_date(F.col("event_time")), 1).otherwise(0)).alias("bad_dt"),
        F.sum(F.when(F.size("slots") != K, 1).otherwise(0)).alias("bad_size"),
        F.sum(F.when(F.size(F.array_distinct(F.col("slots.position"))) != K, 1).otherwise(0)).alias("dup_pos"),
        F.sum(F.when((F.array_min("slots.position") != 1) | (F.array_max("slots.position") != K), 1)
              .otherwise(0)).alias("bad_pos"),
        F.sum(F.when(F.size(F.array_distinct(F.col("slots.ad_id"))) != K, 1).otherwise(0)).alias("dup_ads"),
        F.sum(F.when((F.array_min("slots.propensity") <= 0) | (F.array_max("slots.propensity") > 1), 1)
              .otherwise(0)).alias("bad_prop"),
        F.sum(F.when(F.exists("slots", lambda s: ~s["reward"].isin(0.0, 1.0)), 1).otherwise(0)).alias("bad_rew"),
        F.sum(F.when(F.col("slate_reward").isNotNull(), 1).otherwise(0)).alias("slate_reward_set"),
    ).first().asDict()
    assert row["n"] == cfg.days * cfg.events_per_day == row["distinct_ids"]
    assert {k: v for k, v in row.items() if k not in ("n", "distinct_ids")} == dict.fromkeys(
        ["bad_dt", "bad_size", "dup_pos", "bad_pos", "dup_ads", "bad_prop", "bad_rew", "slate_reward_set"], 0)
    n_policies = 5 if cfg.logging == "multi" else 4
    drow = decisions.select(F.count(F.lit(1)).alias("n"),
                            F.countDistinct("policy_id", "event_id").alias("keys"),
                            F.sum(F.when(F.abs(F.aggregate("slots", F.lit(0.0), lambda a, s: a + s["probability"])
                                               - K) > 1e-12, 1).otherwise(0)).alias("bad_mass")).first()
    assert drow["n"] == drow["keys"] == n_policies * row["n"]
    assert drow["bad_mass"] == 0
    # every decision refers to a logged event of the same dt
    assert decisions.join(logs, on=["event_id", "dt"], how="left_anti").count() == 0
    if cfg.layout == "slotted":  # slot k's ads come from slot k's pool only
        rates = g["logs"].sparkSession.read.parquet(f"{g['out']}/truth/click_rates").select("ad_id", "slot").distinct()
        wrong = _slots(logs).join(rates, on="ad_id").where(F.col("slot") != F.col("position")).count()
        assert wrong == 0


# ---------------------------------------------------------------------------------------------------- determinism


def _comparable(logs):
    """Set operations cannot take MAP columns: the context map as its sorted entries."""
    return logs.select(*[F.array_sort(F.map_entries(F.col(c))).alias(c) if c == "context" else F.col(c)
                         for c in logs.columns])


def test_deterministic_for_a_seed(spark, tmp_path):
    kw = dict(layout="ranked", logging="contextual", n_positions=3, n_ads=10, n_contexts=12, days=2,
              events_per_day=1500, seed=7)
    t1 = generate(spark, GeneratorConfig(**kw), str(tmp_path / "a"))
    t2 = generate(spark, GeneratorConfig(**kw), str(tmp_path / "b"))
    generate(spark, GeneratorConfig(**{**kw, "seed": 8}), str(tmp_path / "c"))
    a, b, c = (_comparable(read_logs(spark, str(tmp_path / x / "logs"))) for x in "abc")
    assert a.count() == 3000
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0
    da, db = (read_decisions(spark, str(tmp_path / x / "decisions")) for x in "ab")
    assert da.exceptAll(db).count() == 0 and db.exceptAll(da).count() == 0
    assert t1["policies"] == t2["policies"] and t1["counts"] == t2["counts"]
    # a different seed gives different rows (event ids embed the seed: compare the slates)
    key = [F.col("dt"), F.col("event_time"), F.col("context_id"), F.col("slots")]
    assert a.select(*key).exceptAll(c.select(*key)).count() > 2900
    # idempotent per dt: re-running day 1 alone keeps every row
    generate(spark, GeneratorConfig(**{**kw, "days": 1}), str(tmp_path / "a"))
    a2 = _comparable(read_logs(spark, str(tmp_path / "a" / "logs")))
    assert a2.count() == 3000 and a2.exceptAll(b).count() == 0


# ---------------------------------------------------------------------------------------------------- click model


def _context_counts(logs) -> pd.Series:
    return logs.groupBy("context_id").count().toPandas().set_index("context_id")["count"]


def test_ctr_per_position_matches_adc_times_mean_p(uniform_ranked):
    g = uniform_ranked
    cfg, logs = g["cfg"], g["logs"]
    P, ctx, _ = _p_matrix(_rates(g["out"]))
    n_c = _context_counts(logs).reindex(ctx, fill_value=0).to_numpy(dtype=float)
    N = n_c.sum()
    mean_p = float(n_c @ P.mean(axis=1) / N)  # uniform logging: E[P(x, a)] at every position
    emp = (_slots(logs).groupBy("position").agg(F.avg("reward").alias("ctr"), F.count(F.lit(1)).alias("m"))
           .toPandas().set_index("position").sort_index())
    adc = np.asarray(g["truth"]["adc"])
    np.testing.assert_allclose(adc, model.PAPER_ADC, rtol=0, atol=0)
    expected = adc * mean_p
    se = np.sqrt(expected * (1 - expected) / emp["m"].to_numpy())
    z = (emp["ctr"].to_numpy() - expected) / se
    assert np.all(np.abs(z) < Z), z
    # and the naive ADC estimate is consistent under uniform logging
    naive = emp["ctr"].to_numpy() / emp["ctr"].to_numpy()[0]
    assert np.all(np.abs(naive - adc) < 0.08)


def _check_propensity_frequencies(slots_df, group_cols):
    """Per (group, position, ad): empirical share of events vs the mean logged propensity; max |z| < Z + 0.5."""
    n_events = slots_df.groupBy(*group_cols, "position").agg(F.count(F.lit(1)).alias("n"))
    cells = (slots_df.groupBy(*group_cols, "position", "ad_id")
             .agg(F.count(F.lit(1)).alias("hits"), F.avg("propensity").alias("mu"),
                  F.min("propensity").alias("mu_min"), F.max("propensity").alias("mu_max"))
             .join(n_events, on=[*group_cols, "position"]).toPandas())
    share = cells["hits"] / cells["n"]
    se = np.sqrt(cells["mu"] * (1 - cells["mu"]) / cells["n"]).clip(lower=1e-12)
    z = (share - cells["mu"]) / se
    return cells, z


def test_logged_propensity_matches_frequency_uniform(uniform_ranked):
    g = uniform_ranked
    cells, z = _check_propensity_frequencies(_slots(g["logs"]), ["dt"])
    assert len(cells) == g["cfg"].days * g["cfg"].n_positions * g["cfg"].n_ads
    np.testing.assert_allclose(cells["mu_min"], 1 / g["cfg"].n_ads, rtol=1e-12)
    np.testing.assert_allclose(cells["mu_max"], 1 / g["cfg"].n_ads, rtol=1e-12)
    assert np.abs(z).max() < Z + 0.5, np.abs(z).max()


def test_logged_propensity_matches_frequency_history(history_ranked):
    g = history_ranked
    cfg = g["cfg"]
    cells, z = _check_propensity_frequencies(_slots(g["logs"]), ["dt"])
    # context-free: one propensity per (dt, position, ad); exploit ads get (1 - eps) + eps / n
    np.testing.assert_allclose(cells["mu_min"], cells["mu_max"], rtol=1e-12)
    hi = (1 - cfg.epsilon) + cfg.epsilon / cfg.n_ads
    assert (np.isclose(cells["mu"], hi, rtol=1e-12)).sum() == cfg.days * cfg.n_positions
    assert np.abs(z).max() < Z + 0.5, np.abs(z).max()
    # the ranking is recomputed from the previous day: day 2's exploit slate is the top-K of day 1's CTR
    s = _slots(g["logs"])
    day1 = s.where(F.col("dt") == F.lit("2026-01-01").cast("date")).groupBy("ad_id").agg(
        F.avg("reward").alias("ctr")).toPandas().sort_values(["ctr"], ascending=False)
    exploit2 = cells[(cells["dt"].astype(str) == "2026-01-02") & np.isclose(cells["mu"], hi)].sort_values("position")
    top = day1["ctr"].to_numpy()
    chosen_ctr = day1.set_index("ad_id").loc[exploit2["ad_id"], "ctr"].to_numpy()
    np.testing.assert_allclose(chosen_ctr, top[:cfg.n_positions], rtol=0, atol=0)


def test_contextual_logging_depends_on_context(spark, tmp_path):
    cfg = GeneratorConfig(layout="ranked", logging="contextual", n_positions=2, n_ads=8, n_contexts=6, days=1,
                          events_per_day=6000, epsilon=0.25, seed=2)
    generate(spark, cfg, str(tmp_path))
    s = _slots(read_logs(spark, str(tmp_path / "logs")))
    cells, z = _check_propensity_frequencies(s, ["context_id"])
    hi = 0.75 + 0.25 / 8
    exploit = cells[np.isclose(cells["mu"], hi)]
    assert len(exploit) == 6 * 2  # one exploit ad per (context, position)
    assert exploit.groupby("position")["ad_id"].nunique().max() > 1  # the ranking differs across contexts
    assert np.abs(z).max() < Z + 0.5


# ---------------------------------------------------------------------------------------------------- truth


def test_oracle_truth_equals_numpy(uniform_ranked):
    g = uniform_ranked
    truth, logs = g["truth"], g["logs"]
    rates = _rates(g["out"])
    P, ctx, ads = _p_matrix(rates)
    adc = np.asarray(truth["adc"])
    K = len(adc)
    best = -np.sort(-P, axis=1)[:, :K]  # top-K by P, best first
    v = best @ adc
    n_c = _context_counts(logs).reindex(ctx, fill_value=0).to_numpy(dtype=float)
    w = rates.groupby("context_id")["context_weight"].first().loc[ctx].to_numpy()
    assert truth["policies"]["oracle"]["realized_value"] == pytest.approx(float(n_c @ v / n_c.sum()), rel=1e-9)
    assert truth["policies"]["oracle"]["value"] == pytest.approx(float(w @ v), rel=1e-9)
    assert w.sum() == pytest.approx(1.0, rel=1e-12)
    uniform_v = P.mean(axis=1) * adc.sum()
    assert truth["policies"]["uniform_random"]["value"] == pytest.approx(float(w @ uniform_v), rel=1e-9)
    assert truth["logging_policy"]["value"] == pytest.approx(float(w @ uniform_v), rel=1e-9)


def test_true_policy_value_matches_ground_truth(spark, uniform_ranked, multi_slotted):
    for g in (uniform_ranked, multi_slotted):
        tv = true_policy_value(spark, g["decisions"], g["logs"], f"{g['out']}/truth").set_index("policy_id")
        n = g["cfg"].days * g["cfg"].events_per_day
        assert (tv["n_events"] == n).all()
        for pid in ("oracle", "most_clicked", "oracle_mix"):  # deterministic given the context: exact
            assert tv.loc[pid, "true_value"] == pytest.approx(
                g["truth"]["policies"][pid]["realized_value"], rel=1e-9), pid
        assert tv.loc["oracle", "true_value"] > tv.loc["oracle_mix", "true_value"] > tv.loc["most_clicked", "true_value"]


def test_logging_policy_mean_reward_matches_truth(spark, uniform_ranked, history_ranked, multi_slotted):
    for g in (uniform_ranked, history_ranked, multi_slotted):
        r = g["logs"].select(F.col("dt").cast("string").alias("dt"),
                             F.aggregate("slots", F.lit(0.0), lambda a, s: a + s["reward"]).alias("r"))
        per_day = r.groupBy("dt").agg(F.avg("r").alias("m"), F.variance("r").alias("v"),
                                      F.count(F.lit(1)).alias("n")).toPandas().set_index("dt")
        truth = g["truth"]["logging_policy"]
        for dt, row in per_day.iterrows():
            expected = truth["per_day"][dt]["realized_value"]
            se = np.sqrt(row["v"] / row["n"])
            assert abs(row["m"] - expected) < Z * se, (g["cfg"].logging, dt, row["m"], expected, se)
        assert g["truth"]["mean_reward"]["overall"] == pytest.approx(
            float((per_day["m"] * per_day["n"]).sum() / per_day["n"].sum()), rel=1e-9)
    # history: the day-2 ranking is learned from day 1's clicks, so its true value beats day 1's seeded ranking
    h = history_ranked["truth"]["logging_policy"]["per_day"]
    assert h["2026-01-02"]["value"] > h["2026-01-01"]["value"]


def test_multi_base_policies_and_best_base(spark, multi_slotted):
    g = multi_slotted
    cfg, logs, decisions, truth = g["cfg"], g["logs"], g["decisions"], g["truth"]
    bases = truth["logging_policy"]["base_policies"]
    counts = logs.groupBy("logging_policy").count().toPandas().set_index("logging_policy")["count"]
    n = counts.sum()
    for name, info in bases.items():
        se = np.sqrt(info["weight"] * (1 - info["weight"]) / n)
        assert abs(counts[name] / n - info["weight"]) < Z * se, name
    # best_base follows, per context, the base with the highest true value ...
    cv = pd.read_parquet(f"{g['out']}/truth/context_values")
    best = (cv[cv["policy_id"].isin(list(bases))].sort_values("value", ascending=False)
            .groupby("context_id")["policy_id"].first())
    bb = decisions.where(F.col("policy_id") == "best_base").join(
        logs.select("event_id", "context_id", "logging_policy", F.col("slots").alias("logged")), on="event_id")
    chosen = bb.select("context_id", "base_policy").distinct().toPandas().set_index("context_id")["base_policy"]
    assert (chosen == best.loc[chosen.index]).all()
    # ... and carries that base's simulated slate: where the base was also the logged one, the slates coincide
    same = bb.where(F.col("base_policy") == F.col("logging_policy"))
    mismatch = same.where(F.transform("slots", lambda s: s["ad_id"]) != F.transform("logged", lambda s: s["ad_id"]))
    assert same.count() > 1000 and mismatch.count() == 0
    # truth of best_base = weighted max over bases per context
    w = cv[cv["policy_id"] == "best_base"].set_index("context_id")
    stacked = cv[cv["policy_id"].isin(list(bases))].pivot(index="context_id", columns="policy_id", values="value")
    np.testing.assert_allclose(w["value"].to_numpy(), stacked.loc[w.index].max(axis=1).to_numpy(), rtol=1e-12)
    assert truth["policies"]["best_base"]["value"] == pytest.approx(
        float(w["context_weight"] @ w["value"]), rel=1e-9)


# ---------------------------------------------------------------------------------------------------- model & CLI


def test_alias_table_is_exact():
    rng = np.random.default_rng(0)
    w = rng.random(17)
    w /= w.sum()
    prob, alias = model.alias_table(w)
    np.testing.assert_allclose(model.alias_probabilities(prob, alias), w, rtol=1e-12)


def test_cli_generate_writes_everything(spark, tmp_path):
    from scavenger.cli import main

    out = tmp_path / "gen"
    code = main(["generate", "--out", str(out), "--days", "1", "--events-per-day", "800", "--layout", "slotted",
                 "--slot-sizes", "3,4", "--positions", "2", "--logging", "history", "--seed", "4"])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    truth = json.loads((out / "ground_truth.json").read_text())
    assert result["status"] == "ok" and result["exit_code"] == 0
    assert result["counts"]["events"] == 800 and result["counts"]["slots"] == 1600
    assert result["counts"]["clicks"] == truth["counts"]["clicks"]
    assert result["timings_seconds"]["generate"] > 0
    assert read_logs(spark, str(out / "logs")).count() == 800
    assert read_decisions(spark, str(out / "decisions")).count() == 4 * 800
    assert truth["config"]["slot_sizes"] == [3, 4]


@pytest.mark.parametrize("flags, words", [
    (["--positions", "5", "--ads", "3"], "ads (3) must be >= positions (5)"),
    (["--adc", "1,.7,.8,.5"], "strictly decreasing"),
    (["--adc", "0.9,.7,.6,.5"], "C_1 = 1"),
    (["--events-per-day", "-5"], "events-per-day must be >= 1"),
    (["--layout", "grid"], "layout must be one of"),
    (["--layout", "slotted", "--slot-sizes", "3,3"], "one size per position"),
    (["--epsilon", "abc"], "--epsilon expects a number"),
])
def test_cli_bad_flags_exit_2(tmp_path, flags, words):
    proc = subprocess.run([sys.executable, "-m", "scavenger", "generate", "--out", str(tmp_path / "x"), *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr


def test_history_logging_biases_naive_adc_low(history_ranked):
    """History logging puts better ads higher, so the naive ADC (CTR_k / CTR_1) falls below the true C_k
    (MATH.md, seed 001 section 4); on days 2-3 (rankings learned from clicks) by more than Z standard errors."""
    g = history_ranked
    s = _slots(g["logs"]).where(F.col("dt") > F.lit(g["cfg"].start_date).cast("date"))
    emp = (s.groupBy("position").agg(F.sum("reward").alias("clicks"), F.count(F.lit(1)).alias("m"))
           .toPandas().set_index("position").sort_index())
    ctr = emp["clicks"] / emp["m"]
    naive = (ctr / ctr.iloc[0]).to_numpy()
    se = naive * np.sqrt(1 / emp["clicks"].to_numpy() + 1 / emp["clicks"].iloc[0])
    adc = np.asarray(g["truth"]["adc"])
    assert np.all(naive[1:] < adc[1:] - Z * se[1:]), (naive, adc, se)
