"""BEIR-format datasets (corpus.jsonl, queries.jsonl, qrels.tsv), read in place.

The public datasets live in ../shared/data/ (never copied into the repo).
"""
import json
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@dataclass
class Dataset:
    name: str
    corpus: dict[str, dict]  # id -> {"title", "text"}
    queries: dict[str, str]  # id -> text
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}


def resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if (DATA_DIR / name_or_path).is_dir():
        return DATA_DIR / name_or_path
    raise FileNotFoundError(f"no dataset at {name_or_path} or {DATA_DIR / name_or_path}")


def load(name_or_path: str) -> Dataset:
    path = resolve(name_or_path)
    corpus = {}
    with open(path / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus[str(row["id"])] = {"title": row.get("title", ""), "text": row.get("text", "")}
    queries = {}
    with open(path / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            queries[str(row["id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(path / "qrels.tsv", encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                continue  # a header line, if any
            qid, did, rel = parts
            if int(rel) > 0:
                qrels.setdefault(qid, {})[did] = int(rel)
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    return Dataset(name=path.name, corpus=corpus, queries=queries, qrels=qrels)


def offtopic_queries(name_or_path: str) -> list[str]:
    """Questions nothing in the dataset answers (offtopic.jsonl, in the hand-made sets only); [] when there are none."""
    path = resolve(name_or_path) / "offtopic.jsonl"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]
