"""The duplicates-and-contradictions development set (issue 17): labelled pairs of knowledge items.

Two sources, read at run time:

- `bench/data/pairs-dev/*.jsonl`, written by hand: agent tips in the knowledge base's shape (task + content,
  English and Chinese), one labelled pair per line:
  `{"id": "c-liveness", "label": "contradiction", "a": {"task": ..., "content": ...}, "b": {...}}`.
  A side may instead name another pair's item (`"b": "d-retry.a"`), so one item can be in several pairs
  (its duplicate, and the tip that contradicts it).
- XQuAD-R (`../shared/data/xquad-r-en-zh`, never copied here): the English and Chinese versions of a
  sentence (`en-aNN-pNNN-sNN` / `zh-...` with the same suffix) or of a whole paragraph are translations,
  so duplicates across languages; other sentences and paragraphs of the same article are hard negatives
  (`unrelated`). Even articles give sentence items (only paragraphs whose two versions have as many
  sentences, so the suffixes line up), odd articles and the rest give paragraph items.

Labels: `duplicate` (the same advice: paraphrase or translation), `refinement` (one adds a detail or a
condition to the other), `contradiction` (opposite advice), `lookalike` (same words or topic, different
advice), `unrelated`. The first three are the pairs the candidate step must find (TRUE_PAIRS); only
`duplicate` pairs should be merged by slim.

Split: each pair belongs to a *unit* (an XQuAD-R article; a hand-written pair with every pair that names
its items) and a unit goes to `dev` or `test` by a hash of its name (`split_of`), so a translation never
sits in one half and its hard negatives in the other. Thresholds are tuned on `dev`; `test` is only scored.
"""
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.datasets import DATA_DIR

HAND_DIR = Path(__file__).resolve().parent / "data" / "pairs-dev"
XQUAD = DATA_DIR / "xquad-r-en-zh"
LABELS = ("duplicate", "refinement", "contradiction", "lookalike", "unrelated")
TRUE_PAIRS = frozenset({"duplicate", "refinement", "contradiction"})
SPLITS = ("dev", "test")


@dataclass(frozen=True)
class Item:
    key: str  # unique in the set: "<pair id>.a" for hand-written items, the corpus id(s) for XQuAD-R ones
    task: str
    content: str
    unit: str
    source: str  # "hand" or "xquad"


@dataclass(frozen=True)
class Pair:
    id: str
    a: str  # item keys
    b: str
    label: str
    unit: str
    source: str

    @property
    def split(self) -> str:
        return split_of(self.unit)


@dataclass
class DevSet:
    items: dict[str, Item] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)

    def split(self, name: str) -> "DevSet":
        """The items and pairs of one half (`dev` or `test`)."""
        pairs = [p for p in self.pairs if p.split == name]
        return DevSet(items={k: i for k, i in self.items.items() if split_of(i.unit) == name}, pairs=pairs)

    def counts(self) -> dict[str, int]:
        out = {label: 0 for label in LABELS}
        for p in self.pairs:
            out[p.label] += 1
        return out


def split_of(unit: str) -> str:
    """`dev` or `test`, by the first byte of the unit name's SHA-1 (deterministic, about half each)."""
    return SPLITS[hashlib.sha1(unit.encode("utf-8")).digest()[0] % 2]


def load(*, hand_dir: Path | None = HAND_DIR, xquad: Path | None = XQUAD, articles: int | None = None) -> DevSet:
    """The whole set: hand-written pairs from `hand_dir`, XQuAD-R pairs from its first `articles` articles."""
    data = DevSet()
    if hand_dir is not None:
        _load_hand(data, hand_dir)
    if xquad is not None:
        _load_xquad(data, xquad, articles)
    return data


def _load_hand(data: DevSet, folder: Path) -> None:
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"hand-written pair ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    # A pair naming another's item joins its unit (union-find over references).
    parent = {i: i for i in ids}

    def root(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for row in rows:
        for side in ("a", "b"):
            if isinstance(row[side], str):
                parent[root(row["id"])] = root(row[side].rsplit(".", 1)[0])
    for row in rows:
        if row["label"] not in LABELS:
            raise ValueError(f"{row['id']}: unknown label {row['label']!r}")
        unit = f"hand:{root(row['id'])}"
        for side in ("a", "b"):
            if isinstance(row[side], dict):
                key = f"{row['id']}.{side}"
                data.items[key] = Item(key=key, task=row[side]["task"], content=row[side]["content"], unit=unit, source="hand")
    for row in rows:
        keys = [row[side] if isinstance(row[side], str) else f"{row['id']}.{side}" for side in ("a", "b")]
        missing = [k for k in keys if k not in data.items]
        if missing:
            raise ValueError(f"{row['id']}: no item {missing[0]}")
        data.pairs.append(Pair(id=row["id"], a=keys[0], b=keys[1], label=row["label"], unit=f"hand:{root(row['id'])}", source="hand"))


def _head(text: str) -> str:
    """A task line for a passage: its first clause, at most about 60 characters (25 in Chinese)."""
    limit = 25 if re.search(r"[\u4e00-\u9fff]", text[:10]) else 60
    clause = re.split(r"[,，;；:：。.!?！？]", text, maxsplit=1)[0].strip() or text
    if len(clause) <= limit:
        return clause
    cut = clause[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut and limit == 60 else cut) + "…"


def _load_xquad(data: DevSet, folder: Path, articles: int | None) -> None:
    sentences: dict[tuple[str, str, str], list[tuple[str, str]]] = {}  # (lang, article, paragraph) -> [(id, text)]
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            lang, article, paragraph, _ = row["id"].split("-")
            sentences.setdefault((lang, article, paragraph), []).append((row["id"], row["text"].strip()))
    by_article: dict[str, list[str]] = {}
    for _, article, paragraph in sentences:
        if paragraph not in by_article.setdefault(article, []):
            by_article[article].append(paragraph)
    chosen = sorted(by_article)[:articles] if articles else sorted(by_article)
    for article in chosen:
        unit = f"xquad:{article}"
        units: list[tuple[str, str]] = []  # (en key, zh key) translation pairs, in order
        for paragraph in by_article[article]:
            en, zh = sentences.get(("en", article, paragraph), []), sentences.get(("zh", article, paragraph), [])
            if not en or not zh:
                continue
            if int(article[1:]) % 2 == 0 and len(en) == len(zh):
                pieces = [([e], [z]) for e, z in zip(en, zh)]
            else:
                pieces = [(en, zh)]
            for en_part, zh_part in pieces:
                keys = []
                for lang, part in (("en", en_part), ("zh", zh_part)):
                    key = part[0][0] if len(part) == 1 else f"{lang}-{article}-{paragraph}"
                    text = ("" if lang == "zh" else " ").join(t for _, t in part)
                    data.items[key] = Item(key=key, task=_head(text), content=text, unit=unit, source="xquad")
                    keys.append(key)
                units.append(tuple(keys))
        for n, (en_key, zh_key) in enumerate(units):
            data.pairs.append(Pair(id=f"x-{en_key}", a=en_key, b=zh_key, label="duplicate", unit=unit, source="xquad"))
            if n + 1 < len(units):  # hard negatives: the next piece of the same article, in both languages
                following_en, following_zh = units[n + 1]
                data.pairs.append(Pair(id=f"x-{en_key}~{following_en}", a=en_key, b=following_en, label="unrelated", unit=unit, source="xquad"))
                data.pairs.append(Pair(id=f"x-{en_key}~{following_zh}", a=en_key, b=following_zh, label="unrelated", unit=unit, source="xquad"))
