"""Fit the calibrated relevance (knowledge/search/relevance.py) on the development half of the public sets.

    .venv/bin/python -m bench.calibrate cmrc2018-dev-zh xquad-r-en-zh scifact-beir-en

For every development query (even positions in queries.jsonl; the odd ones
are held out for bench/ranking.py) the real stage 1 runs with the gate open,
and each of its 20 candidates becomes one example: relevant if the qrels say
so. The same queries are also run against each other dataset's scope, where
nothing is relevant: those candidates are the negatives that teach the model
what "no answer here" looks like. A logistic regression (IRLS, L2 0.0001 on
standardised features) over
`relevance.FEATURES` is fitted; it prints the coefficients to paste into
`relevance.COEFFICIENTS`, and a calibration table (predicted vs observed).
"""
import argparse
import sys

import numpy as np

from bench.retrieval import _point_at_bench_database

POOL_TOP_K = 10  # stage 1 keeps 2 × top_k candidates


def examples(names: list[str]):
    """(features matrix, labels) over every development query, in-scope and cross-scope."""
    from bench import datasets
    from bench.runner import development, prepare, scope_for
    from knowledge.search import engine
    from knowledge.search.relevance import FEATURES
    from knowledge.search.rerank import Gate

    loaded = {name: datasets.load(name) for name in names}
    docs = {}
    for name, data in loaded.items():
        docs[name] = prepare(data)[1]
    rows, labels = [], []
    for name, data in loaded.items():
        for other in loaded:
            for qid, text in development(data.queries):
                result = engine.search(query=text, top_k=POOL_TOP_K, min_score=1, readable_scopes=[scope_for(loaded[other].name)],
                                       rank="relevance", gate=Gate(answer=0.0, floor=0.0, relative=0.0))
                relevant = data.qrels.get(qid, {}) if other == name else {}
                for c in result.candidates:
                    features = c.evidence.features()
                    rows.append([features[f] for f in FEATURES])
                    labels.append(1.0 if relevant.get(docs[other][c.id], 0) > 0 else 0.0)
            print(f"  {name} → {other}: {len(labels)} examples", file=sys.stderr, flush=True)
    return np.asarray(rows), np.asarray(labels)


def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = 0.0001, iterations: int = 50) -> np.ndarray:
    """Weights of P(y=1|x) = sigmoid(x·w), by iteratively reweighted least squares.

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
    penalty = np.full(x.shape[1], l2 * len(y))
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -40, 40)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(x.shape[1])
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--l2", type=float, default=0.0001)
    args = parser.parse_args(argv)
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge.search.relevance import FEATURES

    x, y = examples(args.datasets)
    w = fit_logistic(x, y, l2=args.l2)
    p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -40, 40)))
    print(f"{len(y)} examples, {int(y.sum())} relevant; log loss {float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))):.4f}")
    print("COEFFICIENTS = {")
    print("    " + ", ".join(f'"{name}": {value:.4f}' for name, value in zip(FEATURES, w)))
    print("}")
    print("| predicted | examples | mean predicted | observed relevant |")
    print("|---|---|---|---|")
    for label, n, predicted, observed in calibration_table(p, y):
        print(f"| {label} | {n} | {predicted:.3f} | {observed:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
