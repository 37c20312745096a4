"""Compare fusions on the same candidate lists: `python -m bench.fusion_study xquad-r-en-zh cmrc2018-dev-zh scifact-beir-en`.

For every query the real stage-1 parts (`crosslingual.calibrated_vector_candidates`,
`keyword.keyword_candidates`, pool 100 as for top_k = 10) run once; their lists are
kept in var/bench-cache/lists-<dataset>.pkl, and each fusion setting is then scored
on them (nDCG@10 of the fused order; with every item at score 3 the quality stage keeps
that order). Seconds per setting instead of a full bench run per setting; the
default's numbers match `bench.retrieval`'s hybrid row.
"""
import argparse
import pickle
import sys

from bench.retrieval import ROOT, _point_at_bench_database

FUSIONS = {
    "vector only": lambda fusion: lambda v, k: v,
    "keyword only": lambda fusion: lambda v, k: k,
    **{f"softmax, keyword weight {w}, T vector {tv}, T keyword {tk}": (
        lambda w, tv, tk: lambda fusion: lambda v, k: fusion.softmax_fusion(
            {"vector": v, "keyword": k}, weights={"vector": 1 - w, "keyword": w}, temperatures={"vector": tv, "keyword": tk}))(w, tv, tk)
       for w, tv, tk in ((0.1, 1.4, 0.015), (0.1, 1.4, 0.01), (0.08, 1.7, 0.01), (0.15, 1.2, 0.015), (0.1, 1.0, 0.01), (0.2, 1.0, 0.02), (0.3, 1.0, 0.02), (0.5, 1.0, 0.02), (0.1, 1.4, 0.03))},
    **{f"boost, w = {w}, rank²": (lambda w: lambda fusion: lambda v, k: fusion.keyword_boost(v, k, weight=w, decay=2.0))(w)
       for w in (0.5, 2, 10, 25)},
    **{f"convex, keyword {w}": (lambda w: lambda fusion: lambda v, k: fusion.convex_combination(
        {"vector": v, "keyword": k}, weights={"vector": 1, "keyword": w}, floors={"keyword": 0}, ceilings={"keyword": 1}))(w)
       for w in (0.1, 0.5, 1)},
    **{f"RRF k = 60, keyword weight {w}": (lambda w: lambda fusion: lambda v, k: fusion.reciprocal_rank_fusion(
        {"vector": [i for i, _ in v], "keyword": [i for i, _ in k]}, weights={"vector": 1, "keyword": w}))(w)
       for w in (0.1, 1)},
}


def candidate_lists(name: str) -> dict:
    from django.conf import settings

    from bench import datasets
    from bench.runner import prepare, scope_for
    from knowledge.search import engine
    from knowledge.search.crosslingual import calibrated_vector_candidates
    from knowledge.search.keyword import keyword_candidates

    data = datasets.load(name)  # a folder under ../shared/data, or a path
    path = settings.VAR_DIR / "bench-cache" / f"lists-{data.name}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    embedder, doc_by_id = prepare(data)
    base = engine.narrowed(engine.visible(readable_scopes=[scope_for(data.name)]))
    lists = {}
    for n, (qid, text) in enumerate(data.queries.items(), start=1):
        vector = calibrated_vector_candidates(base, query=text, query_vector=embedder.embed_query(text), embedder=embedder, limit=100)
        keyword = keyword_candidates(base, text=text, limit=100)
        lists[qid] = {"vector": [(doc_by_id[i], s) for i, s in vector], "keyword": [(doc_by_id[i], s) for i, s in keyword]}
        print(f"\r  {data.name}: {n}/{len(data.queries)} queries", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    result = {"lists": lists, "qrels": data.qrels}
    path.write_bytes(pickle.dumps(result))
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="*", default=["xquad-r-en-zh", "cmrc2018-dev-zh", "scifact-beir-en"],
                        help="folders under ../shared/data, or paths")
    names = parser.parse_args(argv).datasets
    _point_at_bench_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench import metrics
    from knowledge.search import fusion

    studied = {name: candidate_lists(name) for name in names}
    print("| fusion | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, make in FUSIONS.items():
        fuse = make(fusion)
        cells = []
        for name in names:
            lists, qrels = studied[name]["lists"], studied[name]["qrels"]
            scores = [metrics.ndcg_at_k([i for i, _ in fuse(l["vector"], l["keyword"])][:10], qrels[q], 10) for q, l in lists.items()]
            cells.append(f"{metrics.mean(scores):.3f}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
