"""Open Bandit Pipeline's slate/ranking estimators on logs in scavenger's contract: a reference to compare against.

scavenger never depends on obp: this script runs in a separate virtualenv of its own, never in the project's
.venv, and nothing in lib/ or tests/ imports it. obp (PyPI ``sb-obp``; obp 0.5.7, sb-obp 0.5.8 and 0.5.10 ship
the same ``obp/ope/estimators_slate.py``) imports torch at import time, but its slate estimators never call
it, so a stub ``torch`` package stands in for it. Setup:

    python3 -m venv /tmp/obpvenv
    /tmp/obpvenv/bin/pip install --no-deps sb-obp
    /tmp/obpvenv/bin/pip install "numpy<2" scipy scikit-learn "pandas<3" matplotlib seaborn tqdm pyyaml "pyarrow<22"
    /tmp/obpvenv/bin/python benchmarks/obp_ranking_check.py --install-torch-stub    # writes site-packages/torch
    /tmp/obpvenv/bin/python -c 'import obp.ope'                                      # must succeed

(numpy < 2 because obp pins it; pyarrow < 22 because pyarrow 22+ needs numpy 2.)

Usage:

    /tmp/obpvenv/bin/python benchmarks/obp_ranking_check.py --logs LOGS --decisions DECISIONS --out obp.json
        [--q-hat QHAT.parquet|.csv] [--positions K] [--logging-policy NAME] [--policies P1,P2]
        [--bootstrap B --seed S] [--meta-out META.json] [--one-slot]
    /tmp/obpvenv/bin/python benchmarks/obp_ranking_check.py --install-torch-stub

Inputs (scavenger's contract, Parquet partitioned by dt=YYYY-MM-DD): LOGS per schemas/impression_log.schema.json,
DECISIONS per schemas/decisions.schema.json (the target's factorized distribution pi_k(a|x) per position).

What it does:
- Keeps the events whose slots hold exactly the positions 1..K (K = --positions, default the largest logged
  position), each once, each with a propensity in (0, 1] and a non-null reward; prints how many were dropped
  and why. Duplicate event_ids: the first row (by dt, then file order) is kept.
- slate_id = 0..n-1 in event_id order; obp position = position - 1 (obp's self-normalised estimators loop
  over positions 0..len_list-1); rows sorted by (slate, position), as Cascade-DR requires.
- Ad ids (logs and decisions together) -> integers 0..A-1 in sorted order.
- Logging scores: pscore_item_position = the logged propensity mu_k(a_k|x); pscore = prod_k mu_k (the slate);
  pscore_cascade at k = prod_{j<=k} mu_j.
- Per target policy, for the events that have a decision whose every position 1..K sums to 1 (others dropped,
  counted): evaluation_policy_action_dist[i, k, a] = pi_k(a|x_i) (0 for ads not listed);
  evaluation_policy_pscore_item_position = pi_k(a_k|x); evaluation_policy_pscore = prod_k; _cascade = cumprod.
  A factorized target's pi_k(a|x) does not depend on the ads above k, so it is also the conditional
  pi(a | x, a_1..a_{k-1}) that Cascade-DR wants.
- Reward: obp's slate value is the sum of the slot rewards. Where the logged slate_reward differs from that
  sum, SIPS and SN-SIPS are also computed on the slate reward ("sips[slate_reward]"), by giving obp the slate
  reward at position 1 and 0 at the other positions.
- Estimators: obp's SlateStandardIPS (sips), SlateIndependentIPS (iips), SlateRewardInteractionIPS (rips),
  their self-normalised forms (snsips, sniips, snrips), SlateCascadeDoublyRobust with:
    * --q-hat FILE (columns event_id, position (1-based), ad_id, q_hat; q_hat is obp's Q_k(x, a_1..a_{k-1}, a),
      the expected reward summed over positions k..K; missing entries are 0 and counted): "cascade-dr[file]";
    * without --q-hat, three runs:
      "cascade-dr[q=0]"     q_hat = 0 everywhere (then Cascade-DR equals RIPS exactly);
      "cascade-dr[q=mean]"  q_hat[i, k, a] = m_k(a) = mean of the logged slot reward over the kept events whose
                            position k shows ad a (0 where (k, a) was never logged); the same for every event and
                            every policy; fitted on the same events it is applied to (no cross-fitting);
      "cascade-dr[q=rtg]"   q_hat[i, k, a] = m_k(a) + sum_{j>k} sum_b pi_j(b|x_i) m_j(b): the reward-to-go
                            that obp's SlateRegressionModel targets (Q_k = r_k + E_pi Q_{k+1}), for a
                            context-free model whose slot means do not depend on the ads above.
- --bootstrap B: obp's estimate_interval too (B resamples of slates, random_state=--seed); written to
  --meta-out only.

--one-slot: for logs whose events each hold one slot (the Open Bandit Dataset sample as `scavenger ingest-obd`
writes it, with `scavenger obd-target` decisions): only obp's SlateIndependentIPS and its self-normalised form,
over rows (slate_id = event), plus iips@k per position and their sum; see one_slot().

Output: prints a table and writes --out as JSON {policy_id: {estimator: value}}; --meta-out (optional) gets the
counts, the ad mapping size, K and the intervals. Memory: q_hat and the action distribution are n * K * A
doubles each.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from obp_inputs import (Data, action_dist_for, explode_slots, load_decisions, load_logs,  # noqa: E402
                        q_hat_from_file, read_partitioned)


def slot_means(data: Data) -> np.ndarray:
    """m[k, a] = mean logged reward of ad a at position k (0 where never logged), over data's events."""
    K, A = data.K, data.A
    s = np.zeros((K, A))
    c = np.zeros((K, A))
    np.add.at(s, (data.position, data.action), data.reward)
    np.add.at(c, (data.position, data.action), 1.0)
    return np.divide(s, c, out=np.zeros_like(s), where=c > 0)


def reward_to_go(m: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """q[i, k, a] = m[k, a] + sum_{j>k} sum_b dist[i, j, b] m[j, b]."""
    e = (dist * m[None]).sum(axis=2)                          # (n, K): E_pi m_j
    later = np.cumsum(e[:, ::-1], axis=1)[:, ::-1] - e        # sum over j > k
    return m[None] + later[:, :, None]


def run_obp(data: Data, dist: np.ndarray, qhats: dict[str, np.ndarray], bootstrap: int, seed: int):
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning, module="obp")   # pandas groupby.apply in obp.utils
    from obp.ope import (
        SelfNormalizedSlateIndependentIPS,
        SelfNormalizedSlateRewardInteractionIPS,
        SelfNormalizedSlateStandardIPS,
        SlateCascadeDoublyRobust,
        SlateIndependentIPS,
        SlateRewardInteractionIPS,
        SlateStandardIPS,
    )
    K, n = data.K, data.n
    mu_rows = np.arange(n * K)
    pi_item = dist.reshape(n * K, data.A)[mu_rows, data.action]
    pi_cascade = np.cumprod(pi_item.reshape(n, K), axis=1).ravel()
    pi_slate = np.repeat(pi_item.reshape(n, K).prod(axis=1), K)
    base = dict(slate_id=data.slate_id, reward=data.reward, position=data.position)
    jobs = {
        "sips": (SlateStandardIPS(len_list=K), dict(pscore=data.pscore, evaluation_policy_pscore=pi_slate)),
        "iips": (SlateIndependentIPS(len_list=K),
                 dict(pscore_item_position=data.pscore_item_position,
                      evaluation_policy_pscore_item_position=pi_item)),
        "rips": (SlateRewardInteractionIPS(len_list=K),
                 dict(pscore_cascade=data.pscore_cascade, evaluation_policy_pscore_cascade=pi_cascade)),
    }
    jobs["snsips"] = (SelfNormalizedSlateStandardIPS(len_list=K), jobs["sips"][1])
    jobs["sniips"] = (SelfNormalizedSlateIndependentIPS(len_list=K), jobs["iips"][1])
    jobs["snrips"] = (SelfNormalizedSlateRewardInteractionIPS(len_list=K), jobs["rips"][1])
    calls = {name: (est, {**base, **kw}) for name, (est, kw) in jobs.items()}
    if data.slate_reward_differs:
        r0 = np.zeros(n * K)
        r0[::K] = data.slate_reward
        for name in ("sips", "snsips"):
            est, kw = jobs[name]
            calls[f"{name}[slate_reward]"] = (est, {**base, "reward": r0, **kw})
    for qname, q in qhats.items():
        calls[f"cascade-dr[{qname}]"] = (
            SlateCascadeDoublyRobust(len_list=K, n_unique_action=data.A),
            {**base, "action": data.action, "pscore_cascade": data.pscore_cascade,
             "evaluation_policy_pscore_cascade": pi_cascade, "q_hat": q.ravel(),
             "evaluation_policy_action_dist": dist.ravel()})
    values, intervals = {}, {}
    for name, (est, kw) in calls.items():
        values[name] = float(est.estimate_policy_value(**kw))
        if bootstrap:
            iv = est.estimate_interval(**kw, n_bootstrap_samples=bootstrap, random_state=seed)
            intervals[name] = {k: float(v) for k, v in iv.items()}
    return values, intervals


def one_slot(a) -> tuple[dict, dict]:
    """--one-slot: logs whose events each hold ONE slot at its logged position (the OBD sample as scavenger
    ingests it). Only the item-position estimators are defined there: obp's SlateIndependentIPS and its
    self-normalised form with slate_id = the event, position = logged position - 1, len_list = K, i.e.
    iips = sum_rows r w / n_rows (the value per shown slot), sniips = sum_k (N_k / N) sum_{rows at k} r w / sum w;
    and iips@k (obp IIPS on the rows at position k), whose sum over k is the item-position model's value of a
    full K-slot slate (SIPS, RIPS and Cascade-DR need the whole slate and cannot be run)."""
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning, module="obp")
    from obp.ope import SelfNormalizedSlateIndependentIPS, SlateIndependentIPS
    t = read_partitioned(a.logs)
    if a.logging_policy is not None:
        t = t.filter(pc.equal(t.column("logging_policy"), a.logging_policy))
    sl = explode_slots(t, ["position", "ad_id", "propensity", "reward"], ["event_id"])
    n_slots = sl.groupby("row").size()
    ok = sl["row"].map(n_slots).eq(1) & sl["propensity"].gt(0) & sl["propensity"].le(1) & sl["reward"].notna()
    ok &= ~sl["event_id"].duplicated(keep="first")
    counts = {"log_rows": t.num_rows, "events_kept": int(ok.sum()), "events_dropped": int(t.num_rows - ok.sum())}
    sl = sl[ok].sort_values("event_id").reset_index(drop=True)
    K = a.positions or int(sl["position"].max())
    sl = sl[sl["position"].between(1, K)]
    dec = load_decisions(a.decisions, a.policies.split(",") if a.policies else None)
    print(counts)
    results, meta = {}, {"K": K, "log_counts": counts, "policies": {}}
    for pol in sorted(dec["policy_id"].unique()):
        d = dec[dec["policy_id"] == pol]
        tot = d.groupby(["event_id", "position"])["probability"].sum()
        good = tot[(tot - 1).abs() <= 1e-9].reset_index()[["event_id", "position"]]
        x = sl.merge(good, on=["event_id", "position"])
        x = x.merge(d.groupby(["event_id", "position", "ad_id"], as_index=False)["probability"].sum(),
                    on=["event_id", "position", "ad_id"], how="left").fillna({"probability": 0.0})
        x = x.sort_values("event_id").reset_index(drop=True)
        kw = dict(slate_id=np.arange(len(x)), reward=x["reward"].to_numpy(float),
                  position=(x["position"].to_numpy() - 1).astype(int),
                  pscore_item_position=x["propensity"].to_numpy(float),
                  evaluation_policy_pscore_item_position=x["probability"].to_numpy(float))
        v = {"iips": float(SlateIndependentIPS(len_list=K).estimate_policy_value(**kw)),
             "sniips": float(SelfNormalizedSlateIndependentIPS(len_list=K).estimate_policy_value(**kw))}
        for k in range(K):
            idx = kw["position"] == k
            if idx.any():
                sub = {key: (np.arange(idx.sum()) if key == "slate_id" else val[idx]) for key, val in kw.items()}
                v[f"iips@{k + 1}"] = float(SlateIndependentIPS(len_list=K).estimate_policy_value(**sub))
        v["sum_k iips@k"] = float(sum(v[f"iips@{k + 1}"] for k in range(K) if f"iips@{k + 1}" in v))
        results[pol] = v
        meta["policies"][pol] = {"rows_evaluated": len(x)}
        print(f"\npolicy {pol}: rows evaluated {len(x)}")
        for name, val in v.items():
            print(f"  {name:24s} {val:.12f}")
    return results, meta


TORCH_STUB = {
    "_stub.py": (
        '"""Stub torch written by scavenger benchmarks/obp_ranking_check.py: lets `import obp` work without torch.\n'
        'Every attribute is an empty class; the obp slate estimators never call torch."""\n\n\n'
        "def make_getattr(modname):\n"
        "    cache = {}\n\n"
        "    def __getattr__(name):\n"
        "        if name.startswith('__'):\n"
        "            raise AttributeError(name)\n"
        "        return cache.setdefault(name, type(name, (), {'__module__': modname}))\n\n"
        "    return __getattr__\n"),
    "__init__.py": "import torch.nn\nimport torch.optim\nimport torch.utils\n",
    "nn/__init__.py": "import torch.nn.functional\n",
    "nn/functional.py": "",
    "optim/__init__.py": "",
    "utils/__init__.py": "import torch.utils.data\n",
    "utils/data/__init__.py": "",
}


def install_torch_stub() -> int:
    """Write the stub torch package into this interpreter's site-packages (refuses if a torch is importable)."""
    import importlib.util
    import sysconfig
    if importlib.util.find_spec("torch") is not None:
        print("a torch package is already importable here; not writing the stub")
        return 0
    root = Path(sysconfig.get_paths()["purelib"]) / "torch"
    for rel, body in TORCH_STUB.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        # submodules first (their imports), then the module's own __getattr__ for anything else
        tail = "" if rel == "_stub.py" else "from torch._stub import make_getattr as _mg\n__getattr__ = _mg(__name__)\n"
        f.write_text(body + tail)
    print(f"wrote the torch stub to {root}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    if argv is None:
        argv = sys.argv[1:]
    if argv == ["--install-torch-stub"]:
        return install_torch_stub()
    ap.add_argument("--logs", required=True)
    ap.add_argument("--decisions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--q-hat", default=None)
    ap.add_argument("--positions", type=int, default=None, help="K (default: the largest logged position)")
    ap.add_argument("--logging-policy", default=None)
    ap.add_argument("--policies", default=None, help="comma-separated policy ids (default: all)")
    ap.add_argument("--bootstrap", type=int, default=0)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--meta-out", default=None)
    ap.add_argument("--one-slot", action="store_true",
                    help="events of one slot each (OBD sample): item-position estimators only")
    a = ap.parse_args(argv)
    if a.one_slot:
        results, meta = one_slot(a)
        Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
        if a.meta_out:
            Path(a.meta_out).write_text(json.dumps(meta, indent=2) + "\n")
        return 0

    sl, K, counts = load_logs(a.logs, a.positions, a.logging_policy)
    for k, v in counts.items():
        print(f"{k}: {v}")
    policies = a.policies.split(",") if a.policies else None
    dec = load_decisions(a.decisions, policies)
    ads = sorted(set(sl["ad_id"]) | set(dec["ad_id"]))
    ad_index = {ad: i for i, ad in enumerate(ads)}
    full = Data(sl, K, ad_index)
    print(f"K = {K}, slates = {full.n}, distinct ads = {full.A}")
    m = slot_means(full)
    q_file = None
    if a.q_hat:
        q_file, qc = q_hat_from_file(a.q_hat, full, ad_index)
        counts.update(qc)
        print(qc)
    results, meta = {}, {"K": K, "n_ads": full.A, "log_counts": counts, "policies": {}}
    for pol in sorted(dec["policy_id"].unique()):
        keep, dist, pc_ = action_dist_for(full, dec[dec["policy_id"] == pol], ad_index)
        data = full.subset(keep)
        if a.q_hat:
            qhats = {"file": q_file[keep]}
        else:
            qhats = {"q=0": np.zeros((data.n, K, data.A)),
                     "q=mean": np.broadcast_to(m, (data.n, K, data.A)).copy(),
                     "q=rtg": reward_to_go(m, dist)}
        values, intervals = run_obp(data, dist, qhats, a.bootstrap, a.seed)
        results[pol] = values
        meta["policies"][pol] = {"counts": pc_, "intervals": intervals}
        print(f"\npolicy {pol}: {pc_}")
        for name, v in values.items():
            print(f"  {name:24s} {v:.12f}")
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    if a.meta_out:
        Path(a.meta_out).write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
