"""`scavenger train` (issue 7, seed 000): learned m-ad policies judged against the generator's exact truth, on DuckDB.

One generated data set (train_world.py: 2 training days, 1 scoring day and 7 more days for the interval's coverage,
20k events each, an event-level eligibility table) and one training run on DuckDB. The same run on Spark, the CLI
without Java and the notebook entry: test_policies_train_engines.py.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from helpers.train_world import M, METHODS, NEW_AD, SCORE, TRAIN, config, make_world, pid, run_duckdb


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    return make_world(str(tmp_path_factory.mktemp("train")), days=10)


@pytest.fixture(scope="module")
def trained(world) -> dict:
    """The training run, once for the module, on DuckDB."""
    out = os.path.join(world["root"], "out")
    cfg = config(world, out)
    return {"summary": run_duckdb(cfg), "out": out, "cfg": cfg}


@pytest.fixture(scope="module")
def collected(world, trained):
    """Small pandas copies (20k events) for the numpy cross-checks."""
    dec = pd.read_parquet(os.path.join(trained["out"], "decisions"))
    logs = pd.read_parquet(os.path.join(world["gen"], "logs", f"dt={SCORE[0]}"), columns=["event_id", "context_id"])
    elig = pd.read_parquet(world["elig"])
    elig = elig[elig["event_id"].isin(logs["event_id"])]
    rates = pd.read_parquet(os.path.join(world["gen"], "truth", "click_rates"))
    adc = pd.read_parquet(os.path.join(world["gen"], "truth", "adc")).sort_values("position")
    return {"dec": dec, "logs": logs, "elig": elig, "rates": rates, "adc": adc["coefficient"].to_numpy(float)}


def _numpy_truth(collected, pid):
    """True value, set value, oracle values per event, with plain numpy/pandas."""
    P = {(c, a): p for c, a, p in collected["rates"][["context_id", "ad_id", "p"]].itertuples(index=False)}
    C = collected["adc"]
    ctx = dict(zip(collected["logs"]["event_id"], collected["logs"]["context_id"]))
    elig = collected["elig"].groupby("event_id")["ad_id"].apply(list).to_dict()
    dec = collected["dec"]
    dec = dec[dec["policy_id"] == pid]
    v = s = v_star = s_star = 0.0
    for eid, slots in zip(dec["event_id"], dec["slots"]):
        x = ctx[eid]
        for sl in slots:
            p = P.get((x, sl["ad_id"]), 0.0)
            v += C[sl["position"] - 1] * p
            s += p
        ps = sorted((P[(x, a)] for a in elig.get(eid, []) if (x, a) in P), reverse=True)[:M]
        s_star += sum(ps)
        v_star += sum(C[k] * p for k, p in enumerate(ps))
    n = len(dec)
    return v / n, s / n, v_star / n, s_star / n


# Stated tolerances on the positional regret V* - V(h) relative to V* (oracle restricted to the eligible ads):
# regression and cost-sensitive with next-best dedup 3%; cost-sensitive with the seed's random dedup 12%, because
# with 40% of the ads filtered out per event the round classifiers (trained with gamma_{k-1} over all ads) produce
# duplicates that random replacement fills with average ads (without an eligibility table it is within 0.1%).
TOLERANCE = {"regression": 0.03, "cost_sensitive_next_best": 0.03, "cost_sensitive": 0.12}


@pytest.mark.parametrize("method", METHODS)
def test_learned_policy_beats_logging_and_is_near_oracle(trained, collected, method):
    summ = trained["summary"]
    pol = summ["policies"][pid(method)]["truth"]
    tr = summ["truth"]
    v, s, v_star, s_star = _numpy_truth(collected, pid(method))
    assert math.isclose(pol["true_value"], v, rel_tol=1e-9)
    assert math.isclose(pol["set_value"], s, rel_tol=1e-9)
    assert math.isclose(tr["oracle_value"], v_star, rel_tol=1e-9)
    assert math.isclose(tr["oracle_set_value"], s_star, rel_tol=1e-9)
    # uniform logging shows a random slate: ~0.44 per event here; the oracle ~0.9
    assert pol["true_value"] > tr["logging_value"] + 0.2
    assert pol["regret"] >= -1e-12
    assert pol["regret"] <= TOLERANCE[method] * tr["oracle_value"]


def test_true_value_agrees_with_generator(world, trained):
    from scavenger.simulation.generator import true_policy_value

    dec = os.path.join(trained["out"], "decisions")
    logs = os.path.join(world["gen"], "logs")
    tv = true_policy_value(None, dec, logs, os.path.join(world["gen"], "truth")).set_index("policy_id")
    for method in METHODS:
        mine = trained["summary"]["policies"][pid(method)]["truth"]["true_value"]
        assert math.isclose(tv.loc[pid(method), "true_value"], mine, rel_tol=1e-9)


def test_regression_regret_under_bound(trained, collected):
    pol = trained["summary"]["policies"][pid("regression")]["truth"]
    assert trained["summary"]["truth"]["n_ads"] == 20
    n_ads = pol["n_ads_bound"]
    assert n_ads == 21  # the 20 ads of the truth and the new eligible ad (P = 0)
    bound = math.sqrt(2 * min(M, n_ads - M)) * math.sqrt(n_ads) * math.sqrt(pol["eps_l2"])
    assert math.isclose(pol["regret_bound"], bound, rel_tol=1e-9)
    assert pol["eps_l2"] > 0
    assert pol["set_regret"] <= pol["regret_bound_per_instance"] <= pol["regret_bound"] + 1e-12
    assert pol["set_regret_under_bound"]
    # eps by numpy from the stored scores g(x, a), the truth P and the scored events' contexts
    g = pd.read_parquet(os.path.join(trained["out"], "model", "regression", "scores"))
    P = collected["rates"].pivot(index="context_id", columns="ad_id", values="p")
    P[NEW_AD] = 0.0
    G = g.pivot(index="context_id", columns="ad_id", values="score").reindex(index=P.index, columns=P.columns)
    n_ctx = collected["logs"]["context_id"].value_counts().reindex(P.index).fillna(0).to_numpy(float)
    sse = ((G.to_numpy(float) - P.to_numpy(float)) ** 2).sum(axis=1)
    eps = float(n_ctx @ sse / n_ctx.sum() / P.shape[1])
    assert math.isclose(pol["eps_l2"], eps, rel_tol=1e-9)


def test_m_distinct_eligible_ads(trained, collected):
    elig = collected["elig"].groupby("event_id")["ad_id"].apply(set).to_dict()
    dec = collected["dec"]
    short = {}
    for method in METHODS:
        sub = dec[dec["policy_id"] == pid(method)]
        assert len(sub) == len(collected["logs"])  # one decision per scored event
        n_short = 0
        for eid, slots in zip(sub["event_id"], sub["slots"]):
            ads = [s["ad_id"] for s in slots]
            e = elig.get(eid, set())
            assert len(set(ads)) == len(ads) == min(M, len(e))
            assert set(ads) <= e
            assert sorted(s["position"] for s in slots) == list(range(1, len(ads) + 1))
            assert all(s["probability"] == 1.0 for s in slots)
            n_short += len(e) < M
        short[method] = n_short
        pol = trained["summary"]["policies"][pid(method)]
        assert pol["events_with_fewer_than_m_eligible"] == n_short > 0
    assert trained["summary"]["counts"]["eligible_ads_unseen_in_training"] == 1
    notes = pd.read_parquet(os.path.join(trained["out"], "decision_notes"))
    for method in METHODS:
        assert int(notes[(notes["policy_id"] == pid(method))]["fewer_than_m"].sum()) == short[method]


COVERAGE_DAYS = ("2026-01-03", "2026-01-10")


@pytest.fixture(scope="module")
def coverage(world) -> dict:
    """The policies' decisions on 8 scoring days (days 3..10, independent realizations of the same world), their
    factored estimate per day by the evaluate pipeline (``--by-day``) and their true value per day:
    {method: frame (dt, value, std_error, ci_low, ci_high, true_value)}."""
    import duckdb

    import scavenger
    out = os.path.join(world["root"], "coverage")
    cfg = config(world, out, estimate=False)
    cfg.truth, (cfg.score_from, cfg.score_to) = "none", COVERAGE_DAYS
    run_duckdb(cfg)
    pids = [pid(m) for m in METHODS]
    ev = scavenger.evaluate(os.path.join(world["gen"], "logs"), os.path.join(out, "decisions"),
                            estimators=["factored"], date_from=COVERAGE_DAYS[0], date_to=COVERAGE_DAYS[1],
                            policies=pids, gate="report", engine="duckdb", by_day=True)
    est = ev.by_day[ev.by_day["estimator"] == "factored"]
    C = pd.read_parquet(os.path.join(world["gen"], "truth", "adc")).sort_values("position")["coefficient"].tolist()
    dec = f"read_parquet('{out}/decisions/*/*.parquet', hive_partitioning = true)"
    truth = duckdb.connect().execute(f"""
        WITH v AS (SELECT d.policy_id, d.dt, sum(({C}::DOUBLE[])[d.s.position] * coalesce(r.p, 0)) AS v
          FROM (SELECT policy_id, dt, event_id, unnest(slots) AS s FROM {dec}) d
          JOIN read_parquet('{world["gen"]}/logs/*/*.parquet', hive_partitioning = true) l ON d.event_id = l.event_id
          LEFT JOIN read_parquet('{world["gen"]}/truth/click_rates/*.parquet') r
            ON r.context_id = l.context_id AND r.ad_id = d.s.ad_id
          GROUP BY d.policy_id, d.dt),
        n AS (SELECT policy_id, dt, count(1) AS n FROM {dec} GROUP BY policy_id, dt)
        SELECT n.policy_id, CAST(n.dt AS VARCHAR) AS dt, coalesce(v.v, 0) / n.n AS true_value
        FROM n LEFT JOIN v ON n.policy_id = v.policy_id AND n.dt = v.dt""").df()
    both = est.assign(dt=est["dt"].astype(str)).merge(truth, on=["policy_id", "dt"])
    return {m: both[both["policy_id"] == pid(m)].sort_values("dt").reset_index(drop=True) for m in METHODS}


@pytest.mark.parametrize("method", METHODS)
def test_factored_estimate_covers_true_value(trained, coverage, method):
    """The training's estimate (the evaluate pipeline's factored estimator, heuristic ADCs of the scoring window,
    their uncertainty propagated) holds its 95% level. One realization misses with probability 5%, so the claim is
    tested where it can fail only by a real fault: over 8 independent scoring days (day 3 among them), at most 2
    misses per policy (P(>= 3 of 8) = 0.6% at 95% coverage) and no bias (the mean of the 8 z-scores within 3 of its
    standard error 1/sqrt(8))."""
    pol = trained["summary"]["policies"][pid(method)]
    est, truth = pol["factored_estimate"], pol["truth"]["true_value"]
    assert est["std_error"] > 0
    assert est["covers_true_value"] == (est["ci_low"] <= truth <= est["ci_high"])
    assert est["adc_method"] == "heuristic" and est["interval_kind"] == "clt"
    days = coverage[method]
    assert len(days) == 8 and (days["std_error"] > 0).all()
    day3 = days[days["dt"].astype(str) == SCORE[0]].iloc[0]
    assert math.isclose(day3["value"], est["value"], rel_tol=1e-9) and math.isclose(day3["true_value"], truth,
                                                                                      rel_tol=1e-9)
    z = (days["value"] - days["true_value"]) / days["std_error"]
    misses = int(((days["true_value"] < days["ci_low"]) | (days["true_value"] > days["ci_high"])).sum())
    assert misses <= 2, f"{misses} of 8 days outside the 95% interval: z = {z.round(2).tolist()}"
    assert abs(z.mean()) <= 3 / math.sqrt(len(z)), f"biased: z = {z.round(2).tolist()}"


def test_factored_estimate_is_the_evaluate_pipelines(world, trained):
    """The training's estimate is ``scavenger evaluate``'s factored row (ADC uncertainty propagated), not another
    implementation: the notebook API over the written decisions gives the same numbers."""
    import scavenger

    pids = [pid(m) for m in METHODS]
    ev = scavenger.evaluate(os.path.join(world["gen"], "logs"), os.path.join(trained["out"], "decisions"),
                            estimators=["factored"], date_from=SCORE[0], date_to=SCORE[1], policies=pids,
                            gate="report", engine="duckdb")
    rows = ev.pandas.set_index("policy_id")
    for p in pids:
        mine = trained["summary"]["policies"][p]["factored_estimate"]
        for col in ("value", "std_error", "ci_low", "ci_high"):
            assert math.isclose(mine[col], rows.loc[p, col], rel_tol=1e-12)
        assert rows.loc[p, "adc_source"] == "estimated"


def test_models_and_metadata_persisted(trained):
    from scavenger.policies.cost_sensitive import SetSelectModel
    from scavenger.policies.features import context_tokens
    from scavenger.policies.regression import PoissonModel

    out = trained["out"]
    model = PoissonModel.load(os.path.join(out, "model", "regression"))
    assert len(model.vocabulary) == model.coef.size > 20
    meta = json.loads(open(os.path.join(out, "model", "regression", "model.json")).read())
    assert meta["policy_id"] == pid("regression") and meta["m"] == M
    assert meta["learner"]["converged"] and meta["adc_source"] == "estimate:heuristic"
    # the saved model gives the stored scores g(x, a) again (contexts rebuilt from their keys '#id|k=v;...')
    g = pd.read_parquet(os.path.join(out, "model", "regression", "scores"))
    ctx = g[["ctx_key", "context_id"]].drop_duplicates("ctx_key").reset_index(drop=True)
    ctx["tokens"] = [context_tokens(k.split("|", 1)[1].split(";"), k, "2") for k in ctx["ctx_key"]]
    assert len(ctx) == 12
    again = model.score(ctx, g[["ad_id", "known"]].drop_duplicates("ad_id"))
    both = g.merge(again, on=["ctx_key", "ad_id"], suffixes=("", "_again"))
    assert len(both) == len(g) and np.array_equal(both["score"].to_numpy(), both["score_again"].to_numpy())
    cm = SetSelectModel.load(os.path.join(out, "model", "cost_sensitive"))
    assert len(cm.rounds) == M and len(cm.classes) == 20
    assert json.loads(open(os.path.join(out, "model", "cost_sensitive", "model.json")).read())["policy_ids"] == \
        [pid("cost_sensitive"), pid("cost_sensitive_next_best")]


def _choices(rows, m, dedup=None):
    """set_select_test / top_m on DuckDB over hand-made scored rows."""
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.policies import eligibility as el

    cols = ["dt", "event_id", "ad_id", "known"] + [f"score_{k}" for k in range(1, m + 1)]
    frame = pd.DataFrame(rows, columns=cols).assign(dt=lambda d: pd.to_datetime(d["dt"]).dt.date)
    engine = DuckDBEngine("test")
    try:
        engine.register_frame("t_in", frame)
        engine.materialize("t_scored", f"SELECT *, score_{m} AS score, {_u(1)} AS u, {_u(2)} AS u2 FROM t_in")
        name = el.top_m(engine, "t_scored", m, "t_out") if dedup is None else \
            el.set_select_test(engine, "t_scored", m, dedup, "t_out")
        return {r["event_id"]: r for r in engine.fetch(f"SELECT * FROM {name}").to_dict("records")}
    finally:
        engine.close()


def _u(seed):
    from scavenger.policies.scoring_sql import uniform

    return uniform(seed)


def test_set_select_test_dedup():
    """Psi_1 = Psi_2 -> the duplicate is replaced by an unused eligible ad; fewer than m eligible -> all of them."""
    rows = []
    # event e1: 4 eligible ads, rounds 1 and 2 both prefer a, round 3 prefers b -> a, <random unused>, b
    for ad, s1, s2, s3 in [("a", .9, .9, .1), ("b", .1, .1, .9), ("c", .0, .0, .0), ("d", .0, .0, .0)]:
        rows.append(("2026-01-01", "e1", ad, True, s1, s2, s3))
    # event e2: 2 eligible ads, m = 3 -> both, once each
    for ad, s in [("a", .5), ("b", .4)]:
        rows.append(("2026-01-01", "e2", ad, ad == "a", s, s, s))
    out = _choices(rows, 3, "random")
    e1 = [s["ad_id"] for s in out["e1"]["slots"]]
    assert e1[0] == "a" and e1[2] == "b" and e1[1] in ("c", "d")
    assert out["e1"]["n_replaced"] == 1 and out["e1"]["n_chosen"] == 3
    e2 = [s["ad_id"] for s in out["e2"]["slots"]]
    assert sorted(e2) == ["a", "b"] and out["e2"]["n_chosen"] == 2 and out["e2"]["n_eligible"] == 2
    assert out["e2"]["n_fallback_chosen"] == 1
    nb = _choices(rows, 3, "next_best")
    assert [s["ad_id"] for s in nb["e1"]["slots"]][:2] == ["a", "b"]
    assert [s["ad_id"] for s in nb["e1"]["slots"]][2] in ("c", "d") and nb["e1"]["n_replaced"] == 2
    assert [s["ad_id"] for s in nb["e2"]["slots"]] == ["a", "b"] and nb["e2"]["n_chosen"] == 2
    tm = _choices(rows, 3)     # top_m by score_3
    assert [s["ad_id"] for s in tm["e1"]["slots"]][0] == "b"
    assert [s["position"] for s in tm["e1"]["slots"]] == [1, 2, 3]


def test_cli_bad_windows_exit_2(tmp_path):
    from scavenger.cli import main

    code = main(["train", "--logs", str(tmp_path), "--from", "2026-01-02", "--to", "2026-01-03",
                 "--score-from", "2026-01-03", "--score-to", "2026-01-03", "--out", str(tmp_path / "o")])
    assert code == 2
    code = main(["train", "--logs", str(tmp_path), "--from", "2026-01-01", "--to", "2026-01-01",
                 "--score-from", "2026-01-02", "--score-to", "2026-01-02", "--m", "0", "--out", str(tmp_path / "o")])
    assert code == 2


# --- hostile contexts, huge contexts, data that cannot identify the ADCs (a small world: 2k events a day) ---------


@pytest.fixture(scope="module")
def small_world(tmp_path_factory) -> dict:
    return make_world(str(tmp_path_factory.mktemp("train_small")), days=3, events_per_day=2000)


def _rewrite_logs(world: dict, dst, fn) -> str:
    """A copy of the small world's logs with ``fn(rows, day)`` applied to every file's rows (a list of dicts)."""
    import glob
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    logs = os.path.join(str(dst), "logs")
    shutil.copytree(os.path.join(world["gen"], "logs"), logs)
    for f in sorted(glob.glob(os.path.join(logs, "dt=*", "*.parquet"))):
        t = pq.read_table(f)
        rows = t.to_pylist()
        fn(rows, f.split("dt=")[1].split(os.sep)[0])
        pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), f)
    return logs


def _small_config(logs: str, out, **kw):
    from scavenger.policies.train import TrainConfig

    args = dict(logs=logs, date_from=TRAIN[0], date_to=TRAIN[1], score_from=SCORE[0], score_to=SCORE[1],
                out=str(out), method="both", m=M, adc="1,0.613,0.527,0.433", truth="none", estimate=False)
    return TrainConfig(**{**args, **kw})


def _train_args(logs: str, out, *extra) -> list:
    return ["train", "--logs", logs, "--from", TRAIN[0], "--to", TRAIN[1], "--score-from", SCORE[0],
            "--score-to", SCORE[1], "--out", str(out), "--engine", "duckdb", "--truth", "none", "--no-estimate",
            *extra]


def test_context_tokens_null_entries():
    """A null context map comes from the engine as None, pandas NA or NaN: no entries, never a TypeError."""
    from scavenger.policies.features import context_tokens, tokens_by_context

    for null in (None, pd.NA, float("nan"), np.nan):
        assert context_tokens(null, "#c|", "2") == []
        assert context_tokens(null, "#c|", "full") == ["@#c|"]
    assert context_tokens(["a=1", None, pd.NA, float("nan"), "b=2"], "k", "2") == ["a=1", "b=2", "a=1&b=2"]
    assert context_tokens(np.array(["a=1", "b=2"], dtype=object), "k", "1") == ["a=1", "b=2"]
    assert context_tokens(["a=1"], pd.NA, "full") == ["a=1", "@"]
    frame = pd.DataFrame({"ctx_key": ["#a|", "#b|f=1"], "singles": pd.Series([pd.NA, ["f=1"]], dtype=object)})
    assert tokens_by_context(frame, "2") == {"#a|": [], "#b|f=1": ["f=1"]}


def test_train_null_context(small_world, tmp_path):
    """Null context maps (the contract allows them) train and decide like contexts without features, with the
    ADCs estimated (in process) and through the CLI (every context null, --adc numbers)."""
    from scavenger.cli import main

    def some_null(rows, day):
        for i, r in enumerate(rows):
            if i % 3 == 0:
                r["context"] = None

    logs = _rewrite_logs(small_world, tmp_path / "some", some_null)
    summ = run_duckdb(_small_config(logs, tmp_path / "out", adc="estimate"))
    assert summ["counts"]["train_events"] == 2 * small_world["events_per_day"]
    assert all(p["events_decided"] == small_world["events_per_day"] for p in summ["policies"].values())
    assert summ["counts"]["train_rows_pairs_capped"] == 0 and "warnings" not in summ

    def all_null(rows, day):
        for r in rows:
            r["context"] = None

    logs = _rewrite_logs(small_world, tmp_path / "all", all_null)
    assert main(_train_args(logs, tmp_path / "out_all", "--adc", "1,0.6,0.5,0.4")) == 0
    res = json.load(open(tmp_path / "out_all" / "result.json"))
    assert res["status"] == "ok" and res["counts"]["score_events"] == small_world["events_per_day"]


def test_context_tokens_pairs_capped():
    """Pairs come from the first max_pair_keys entries only (a bounded number per context); a context within the
    cap has every pair, as before."""
    from scavenger.policies.features import PAIR_KEYS, capped_rows, context_tokens, pairs_capped

    few = [f"k{j:02d}=v" for j in range(PAIR_KEYS)]
    full = few + [f"{a}&{b}" for i, a in enumerate(few) for b in few[i + 1:]]
    assert context_tokens(few, "k", "2") == full and not pairs_capped(few, "2")
    many = [f"k{j:04d}=v" for j in range(3000)]
    tokens = context_tokens(many, "k", "2")
    assert len(tokens) == 3000 + PAIR_KEYS * (PAIR_KEYS - 1) // 2
    assert tokens[:3000] == many and f"k0000=v&k{PAIR_KEYS - 1:04d}=v" in tokens
    assert f"k0000=v&k{PAIR_KEYS:04d}=v" not in tokens
    assert len(context_tokens(many, "k", "full", max_pair_keys=10)) == 3000 + 45 + 1
    assert context_tokens(many, "k", "1") == many and not pairs_capped(many, "1")
    frame = pd.DataFrame({"ctx_key": ["a", "b", "c"], "singles": [many, few, None], "n_rows": [7, 3, 2]})
    assert capped_rows(frame, "2") == (7, 1) and capped_rows(frame, "1") == (0, 0)


def test_train_big_context_bounded(small_world, tmp_path):
    """One training row and one scoring row with 600 context entries: the pairs of interactions 2 are those of the
    first 64 entries (2016, not 179,700 per context, each crossed with the ads), counted and warned about."""
    from scavenger.policies.regression import PoissonModel

    def big(rows, day):
        rows[0]["context"] = [(f"k{j:03d}", f"v{j % 5}") for j in range(600)]

    logs = _rewrite_logs(small_world, tmp_path / "big", big)
    summ = run_duckdb(_small_config(logs, tmp_path / "out"))
    c = summ["counts"]
    assert (c["train_rows_pairs_capped"], c["train_contexts_pairs_capped"]) == (2, 2)       # one per training day
    assert (c["score_rows_pairs_capped"], c["score_contexts_pairs_capped"]) == (1, 1)
    assert summ["max_pair_keys"] == 64 and "first 64 entries" in summ["warnings"][0]
    model = PoissonModel.load(os.path.join(tmp_path, "out", "model", "regression"))
    assert model.info["n_features"] < 30_000             # without the cap: over a million ad x pair tokens
    assert any(t.endswith("&k063=v3") for t in model.vocabulary)
    assert not any("&k064=" in t or "&k599=" in t for t in model.vocabulary)
    assert any(t.endswith("|k599=v4") for t in model.vocabulary)      # every entry still a single token
    meta = json.load(open(os.path.join(tmp_path, "out", "model", "regression", "model.json")))
    assert meta["max_pair_keys"] == 64 and meta["config"]["max_pair_keys"] == 64


def test_cli_max_pair_keys_flag(small_world, tmp_path):
    from scavenger.cli import main

    logs = os.path.join(small_world["gen"], "logs")
    assert main(_train_args(logs, tmp_path / "o", "--max-pair-keys", "0")) == 2
    assert main(_train_args(logs, tmp_path / "o", "--max-id-length", "0")) == 2
    for bad in ("inf", "nan", "-1"):        # inf reached the Newton solver: exit 1
        assert main(_train_args(logs, tmp_path / "o", "--reg-param", bad)) == 2
    assert main(_train_args(logs, tmp_path / "o", "--m", "100000")) == 3   # more than the ads: exit 1 after fitting
    (tmp_path / "elig.csv").write_text("event_id,ad_id\ne1,a1\n")
    assert main(_train_args(logs, tmp_path / "o", "--eligibility", str(tmp_path / "elig.csv"))) == 2


def test_train_adc_not_identified_is_a_data_check(small_world, tmp_path, capsys):
    """Logs whose rewards are all 0 cannot identify the ADCs: exit 3 (a data check), with the advice. A stored ADC
    table given with --adc is an argument, refused as evaluate refuses it (exit 2): coefficients its run did not
    identify (with that run's reason), or no ADC rows at all."""
    from scavenger.cli import main

    def no_clicks(rows, day):
        for r in rows:
            for s in r["slots"] or []:
                s["reward"] = 0.0

    logs = _rewrite_logs(small_world, tmp_path / "zero", no_clicks)
    assert main(_train_args(logs, tmp_path / "o1")) == 3
    err = capsys.readouterr().err
    assert "cannot estimate ADCs from the training logs" in err and "pass --adc numbers" in err
    assert json.load(open(tmp_path / "o1" / "result.json"))["exit_code"] == 3
    table = tmp_path / "adc.parquet"
    pd.DataFrame({"position": [1, 2, 3, 4], "method": "heuristic", "coefficient": [1.0, np.nan, np.nan, np.nan],
                  "identified": [True, False, False, False],
                  "reason": [None] + ["not identifiable: no clicks at position 1"] * 3}).to_parquet(table)
    good = os.path.join(small_world["gen"], "logs")
    assert main(_train_args(good, tmp_path / "o2", "--adc", str(table))) == 2
    err = capsys.readouterr().err
    assert "not identifiable: no clicks at position 1" in err and "every C_k must be a positive number" in err
    assert not (tmp_path / "o2" / "decisions").exists()           # refused before an engine started
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"position": [None, 1.5], "method": ["x", None], "coefficient": ["a", "1"]}).to_parquet(bad)
    assert main(_train_args(good, tmp_path / "o3", "--adc", str(bad))) == 2
    naive = tmp_path / "naive.csv"          # another method than --adc-method's: named, never silently swapped
    pd.DataFrame({"position": [1, 2, 3, 4], "method": "naive", "coefficient": [1.0, .6, .4, .3]}).to_csv(naive)
    assert main(_train_args(good, tmp_path / "o4", "--adc", str(naive))) == 2
    assert "--adc-method 'heuristic': the ADC table" in capsys.readouterr().err
    assert main(_train_args(good, tmp_path / "o5", "--adc", str(naive), "--adc-method", "naive")) == 0
