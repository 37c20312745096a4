"""Does feedback help or hurt the ranking an agent gets? Simulated feedback on the public sets.

    .venv/bin/python -m bench.ranking cmrc2018-dev-zh xquad-r-en-zh scifact-beir-en
    .venv/bin/python -m bench.ranking cmrc2018-dev-zh xquad-r-en-zh --split development --tune

For each dataset (items in their own scope, as bench/retrieval.py stores
them) and each feedback scenario, every query's stage 1 runs once through
the real engine with the relevance gate open; stage 2 (rerank.quality_rerank,
the code the API runs) then orders those candidates for the default ranking
(`rank="quality"`) and for `rank="relevance"`, top 10, `min_score` 3:

- (a) none: every item score 3, no feedback;
- (b) noise: score 1-5, helpful 0-5 and harmful 0-2 drawn at random,
  whatever the relevance;
- (c) popular distractors: a fifth of the items no query is about get score 5
  and 20 helpful cases;
- (d) informative: for each query its relevant items get score 4 and 3
  helpful cases, and the three best-ranked wrong candidates 2 harmful cases.

Empty answers: each dataset's queries are also run against the next
dataset's scope, where nothing is relevant; the share that returns nothing
is reported, with the in-set recall@10 lost to the gate (gate on vs off,
scenario a).

Queries are split in two by question (bench/runner.py): `--split development` (even
questions) is where thresholds are tuned (`--tune` prints a grid), the
default `held-out` (odd questions; `runner.half`) is only ever scored.
"""
import argparse
import copy
import itertools
import random
import sys
from dataclasses import dataclass

from bench.retrieval import _point_at_bench_database

TOP_K = 10
MIN_SCORE = 3
SCENARIOS = ("a_none", "b_noise", "c_popular_distractors", "d_informative")
SEED = 13


@dataclass
class Run:
    """One query's stage-1 candidates under one scenario, and what is relevant to it."""

    candidates: list
    relevant: dict  # knowledge id -> gain


def _feedback_state(items, scenario: str, rng: random.Random, never_relevant: set[str]) -> dict[str, tuple[int, int, int]]:
    """item id -> (score, helpful, harmful) for the query-independent scenarios."""
    if scenario == "b_noise":
        return {i: (rng.randint(1, 5), rng.randint(0, 5), rng.randint(0, 2)) for i in items}
    if scenario == "c_popular_distractors":
        chosen = {i for i in sorted(never_relevant) if rng.random() < 0.2}
        return {i: ((5, 20, 0) if i in chosen else (3, 0, 0)) for i in items}
    return {i: (3, 0, 0) for i in items}


def collect(name: str, split: str, max_queries: int = 0, empty_against: str | None = None) -> dict[str, list[Run]]:
    """scenario -> runs over the dataset's queries (stage 1 once each, gate open)."""
    from bench import datasets
    from bench.runner import half, prepare, scope_for
    from knowledge.search import engine
    from knowledge.search.rerank import Gate

    data = datasets.load(name)
    _, doc_by_id = prepare(data)
    id_by_doc = {doc: kid for kid, doc in doc_by_id.items()}
    queries = half(split, data.queries)
    if max_queries:
        queries = queries[:max_queries]
    judged = {doc for qrels in data.qrels.values() for doc in qrels}
    never_relevant = {kid for kid, doc in doc_by_id.items() if doc not in judged}
    rng = random.Random(SEED)
    open_gate = Gate(answer=0.0, floor=0.0, relative=0.0)
    runs: dict[str, list[Run]] = {}

    def stage1(text, scope=None):
        return engine.search(query=text, top_k=TOP_K, min_score=1, readable_scopes=[scope or scope_for(data.name)],
                             rank="relevance", gate=open_gate).candidates

    first = []  # stage 1 does not look at feedback: run it once per query
    for qid, text in queries:
        relevant = {id_by_doc[d]: g for d, g in data.qrels.get(qid, {}).items() if d in id_by_doc and g > 0}
        if relevant:
            first.append((stage1(text), relevant))
    for scenario in SCENARIOS:
        state = _feedback_state(doc_by_id, scenario, rng, never_relevant)
        runs[scenario] = []
        for found, relevant in first:
            candidates = [copy.copy(c) for c in found]
            for c in candidates:
                c.score, c.helpful, c.harmful = state[c.id]
            if scenario == "d_informative":
                wrong = [c for c in sorted(candidates, key=lambda c: -c.relevance) if c.id not in relevant][:3]
                for c in candidates:
                    if c.id in relevant:
                        c.score, c.helpful, c.harmful = 4, 3, 0
                    elif c in wrong:
                        c.score, c.helpful, c.harmful = 3, 0, 2
            runs[scenario].append(Run(candidates=candidates, relevant=relevant))
        print(f"  {name} {split} {scenario}: {len(runs[scenario])} queries", file=sys.stderr, flush=True)
    if empty_against:
        other = datasets.load(empty_against)
        prepare(other)
        runs["empty"] = [Run(candidates=stage1(text, scope_for(other.name)), relevant={}) for _, text in queries]
    offtopic = half(split, dict(enumerate(datasets.offtopic_queries(name))))
    if offtopic:  # a hand-made set's questions nothing in it answers, asked of its own scope (the same half)
        prepare(data)
        runs["offtopic"] = [Run(candidates=stage1(text), relevant={}) for _, text in offtopic]
    return runs


def score(runs: list[Run], *, rank: str, answer: float, floor: float, relative: float, weight: float) -> dict[str, float]:
    from bench import metrics
    from knowledge.search.rerank import Gate, quality_rerank

    ndcg, recall, empty = [], [], 0
    for run in runs:
        hits = quality_rerank([copy.copy(c) for c in run.candidates], top_k=TOP_K, min_score=MIN_SCORE, rank=rank,
                              gate=Gate(answer=answer, floor=floor, relative=relative), quality_weight=weight)
        ranked = [h.id for h in hits]
        empty += not ranked
        if run.relevant:
            ndcg.append(metrics.ndcg_at_k(ranked, run.relevant, TOP_K))
            recall.append(metrics.recall_at_k(ranked, run.relevant, TOP_K))
    return {"ndcg": metrics.mean(ndcg), "recall": metrics.mean(recall), "empty": empty / max(len(runs), 1)}


def _both(runs, settings):
    default = score(runs, rank="quality", **settings)["ndcg"]
    plain = score(runs, rank="relevance", **settings)["ndcg"]
    return default, plain


def _empties(runs, settings):
    """(share of the cross-scope queries answered with nothing, in-set recall@10 lost to the gate)."""
    open_gate = {**settings, "answer": 0.0, "floor": 0.0, "relative": 0.0}
    empty = score(runs["empty"], rank="quality", **settings)["empty"]
    drop = score(runs["a_none"], rank="quality", **open_gate)["recall"] - score(runs["a_none"], rank="quality", **settings)["recall"]
    return empty, drop


def report(all_runs: dict[str, dict], settings: dict) -> None:
    print(f"\n{settings}")
    print("| dataset | scenario | default nDCG@10 | relevance-only nDCG@10 | ratio | target |")
    print("|---|---|---|---|---|---|")
    targets = {"a_none": "within 0.005", "b_noise": "≥ 0.97×", "c_popular_distractors": "≥ 0.97×", "d_informative": "> relevance-only"}
    for name, runs in all_runs.items():
        for scenario in SCENARIOS:
            default, plain = _both(runs[scenario], settings)
            print(f"| {name} | {scenario} | {default:.3f} | {plain:.3f} | {default / plain if plain else 0:.3f} | {targets[scenario]} |")
    print("\n| dataset | asked of | queries answered with nothing | in-set recall@10 lost to the gate |")
    print("|---|---|---|---|")
    for name, runs in all_runs.items():
        if "empty" in runs:
            empty, drop = _empties(runs, settings)
            print(f"| {name} | {runs['_against']} | {empty:.1%} | {drop:.4f} |")
        if "offtopic" in runs:
            empty = score(runs["offtopic"], rank="quality", **settings)["empty"]
            print(f"| {name} | its own scope, off-topic queries (offtopic.jsonl) | {empty:.1%} | |")


def tune(all_runs) -> None:
    """A grid over the gate and the quality weight, on the runs given (use the development split)."""
    print("| answer | floor | relative | weight | min ratio b/c | max a gap | min d gain | min empty | max recall drop |")
    print("|---|---|---|---|---|---|---|---|---|")
    grid = itertools.product((0.01, 0.02, 0.03, 0.05, 0.1), (0.0, 0.01), (0.0, 0.05), (0.02, 0.03, 0.04, 0.05, 0.1))
    for answer, floor, relative, weight in grid:
        settings = {"answer": answer, "floor": floor, "relative": relative, "weight": weight}
        ratios, gaps, gains, empties, drops = [], [], [], [], []
        for runs in all_runs.values():
            for scenario in SCENARIOS:
                default, plain = _both(runs[scenario], settings)
                if scenario == "a_none":
                    gaps.append(plain - default)
                elif scenario == "d_informative":
                    gains.append(default - plain)
                else:
                    ratios.append(default / plain if plain else 0.0)
            if "empty" in runs:
                empty, drop = _empties(runs, settings)
                empties.append(empty)
                drops.append(drop)
            if "offtopic" in runs:
                empties.append(score(runs["offtopic"], rank="quality", **settings)["empty"])
        print(f"| {answer} | {floor} | {relative} | {weight} | {min(ratios):.3f} | {max(gaps):.4f} | {min(gains):.4f} | "
              f"{min(empties, default=0):.1%} | {max(drops, default=0):.4f} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--split", choices=["held-out", "development"], default="held-out")
    parser.add_argument("--max-queries", type=int, default=0)
    parser.add_argument("--tune", action="store_true", help="print a grid of gate and weight settings")
    parser.add_argument("--answer", type=float, help="override rerank.ANSWER_FLOOR")
    parser.add_argument("--floor", type=float, help="override rerank.RELEVANCE_FLOOR")
    parser.add_argument("--relative", type=float, help="override rerank.RELATIVE_FLOOR")
    parser.add_argument("--weight", type=float, help="override rerank.QUALITY_WEIGHT")
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge.search.rerank import ANSWER_FLOOR, QUALITY_WEIGHT, RELATIVE_FLOOR, RELEVANCE_FLOOR

    all_runs = {}
    for i, name in enumerate(args.datasets):
        against = args.datasets[(i + 1) % len(args.datasets)] if len(args.datasets) > 1 else None
        all_runs[name] = collect(name, args.split, args.max_queries, empty_against=against)
        all_runs[name]["_against"] = against
    if args.tune:
        tune(all_runs)
    else:
        defaults = {"answer": ANSWER_FLOOR, "floor": RELEVANCE_FLOOR, "relative": RELATIVE_FLOOR, "weight": QUALITY_WEIGHT}
        report(all_runs, {k: v if getattr(args, k) is None else getattr(args, k) for k, v in defaults.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
