"""Text preparation for keyword search: Chinese segmentation and identifiers.

PostgreSQL's parser sees a run of Chinese characters as one word, so Chinese
is segmented in Python (jieba, search mode: long words and their parts;
`jieba_search` runs it faster, word for word the same) and
joined with spaces before `to_tsvector('english', ...)`, which also stems the
English. Identifiers such as `undetected_chromedriver`, `ERR_CONNECTION_RESET`
or `E1101` are also indexed whole (config 'simple') so an exact name matches
exactly rather than only as stemmed parts.
"""
import logging
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from django.conf import settings

from knowledge.search.jieba_search import cut_for_search

CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# A token with a digit, an inner _ . - / : or an inner capital: a name, not a word.
IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/:]*[A-Za-z0-9]")
HAS_MARK = re.compile(r"[0-9_.\-/:]|[a-z][A-Z]")
MAX_TEXT = 200_000
# Function words that carry no topic; PostgreSQL's 'english' config knows only
# English stop words, so without this "的" would match half the corpus.
CHINESE_STOP_WORDS = frozenset(
    "的 了 是 在 和 与 及 或 而 也 就 都 又 还 着 过 把 被 让 给 对 从 向 于 为 以 之 其 这 那 "
    "这个 那个 这些 那些 什么 怎么 怎样 如何 哪些 哪个 为什么 是否 可以 能 会 要 吗 呢 吧 啊 "
    "我 你 他 她 它 我们 你们 他们 一个 一些 没有 有 很 更 最 并 但 但是 如果 因为 所以 时 时候".split()
)


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def segment(text: str) -> str:
    """The text with every Chinese run split into space-separated words.

    Where a model service runs (KNOWHUB_MODEL_SERVICE), its jieba does it: the
    dictionary is held once per machine.
    """
    text = text[:MAX_TEXT]
    if not CJK_RUN.search(text):
        return text
    if settings.KNOWHUB_MODEL_SERVICE:
        from knowledge.search.model_client import text_call

        return text_call({"op": "segment", "text": text}, lambda: segment_here(text))
    return segment_here(text)


def segment_many(texts: Sequence[str]) -> list[str]:
    """`segment` of each text, as one job: a Chinese run that recurs in the texts is segmented once, and a
    model service is asked once for them all (the bulk path's keyword documents)."""
    texts = [text[:MAX_TEXT] for text in texts]
    if not any(CJK_RUN.search(text) for text in texts):
        return texts
    if settings.KNOWHUB_MODEL_SERVICE:
        from knowledge.search.model_client import text_call

        segmented = []
        for chunk in _chunks(texts, SERVICE_CHARS):  # each request well inside the service's reply timeout
            segmented += text_call({"op": "segment_many", "texts": chunk}, lambda chunk=chunk: segment_many_here(chunk))
        return segmented
    return segment_many_here(texts)


# Characters per segment_many request to the model service: ~1 s of jieba here, far inside the client's 30 s wait
# for a reply (a bulk batch of long Chinese items is tens of millions of characters: one request would time out).
SERVICE_CHARS = 250_000


def _chunks(texts: list[str], limit: int) -> list[list[str]]:
    """`texts` in order, in runs of at most `limit` characters (a longer text alone)."""
    chunks, current, size = [], [], 0
    for text in texts:
        if current and size + len(text) > limit:
            chunks.append(current)
            current, size = [], 0
        current.append(text)
        size += len(text)
    return chunks + [current] if current else chunks


def segment_here(text: str, runs: dict[str, str] | None = None) -> str:
    """`segment` with this process's jieba; `runs` (a run's words, with the spaces around them) is filled
    and read, so that texts segmented together cut a recurring run once."""
    tokenizer = _jieba().dt
    runs = {} if runs is None else runs

    def split(match: re.Match) -> str:
        run = match.group(0)
        words = runs.get(run)
        if words is None:
            kept = (w for w in cut_for_search(run, tokenizer) if w.strip() and w not in CHINESE_STOP_WORDS)
            words = runs[run] = " " + " ".join(kept) + " "
        return words

    return CJK_RUN.sub(split, text)


def segment_many_here(texts: Sequence[str]) -> list[str]:
    """`segment_many` with this process's jieba. The runs' words are kept for this call only: jieba's
    dictionary is read afresh by the next (words added to it count)."""
    runs: dict[str, str] = {}
    return [segment_here(text, runs) for text in texts]


# How informative a Chinese word is in general use, from jieba's own IDF table (a large
# background corpus): below COMMON_IDF an everyday word (不会 4.4), from RARE_IDF on a
# rare one (拜占庭 10.3, 爬虫 11.4); words it does not list count as rare.
COMMON_IDF, RARE_IDF = 5.0, 9.0


@lru_cache(maxsize=1)
def _background_idf() -> tuple[dict[str, float], float]:
    import jieba.analyse

    _jieba()
    table = jieba.analyse.default_tfidf
    return table.idf_freq, table.median_idf


def informativeness(word: str) -> float:
    """0 (an everyday word) .. 1 (a rare one): how much a word says about a text's topic in general use.

    Chinese words are looked up in jieba's background IDF table; other words
    count fully (PostgreSQL's 'english' config has already dropped English
    stop words).
    """
    if not CJK_RUN.search(word):
        return 1.0
    if settings.KNOWHUB_MODEL_SERVICE:
        from knowledge.search.model_client import remote_informativeness

        return remote_informativeness(word, informativeness_here)
    return informativeness_here(word)


def informativeness_here(word: str) -> float:
    """`informativeness` from this process's copy of the table."""
    table, median = _background_idf()
    idf = table.get(word, max(median, RARE_IDF))
    return max(0.0, min((idf - COMMON_IDF) / (RARE_IDF - COMMON_IDF), 1.0))


def identifiers(text: str) -> list[str]:
    """Distinct identifier-like tokens, lower-cased, in order of appearance."""
    found = IDENTIFIER.findall(text[:MAX_TEXT])
    # a lower-case word (most tokens) has no mark: skipped without asking HAS_MARK
    return list(dict.fromkeys([tok.lower() for tok in found
                               if not (tok.isalpha() and tok.islower()) and HAS_MARK.search(tok) and len(tok) <= 100]))


# Writing systems, for language-calibrated vector search (knowledge.search.crosslingual): their letters'
# code point ranges, ends included.
_SCRIPTS = (
    ("kana", ((0x3040, 0x30FF),)),
    ("hangul", ((0xAC00, 0xD7AF), (0x1100, 0x11FF))),
    ("han", ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))),
    ("cyrillic", ((0x0400, 0x04FF),)),
    ("arabic", ((0x0600, 0x06FF),)),
    ("latin", ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F))),
)
SCRIPTS = (*(name for name, _ in _SCRIPTS), "")  # every value script_of returns ('' for a text without letters)
# script_of counts a sample's letters in bulk rather than a list of matches per script: each code point is
# placed among the ranges' sorted edges (numpy.searchsorted), where one inside a range lands in an odd slot.
_RANGES = sorted((low, high, name) for name, ranges in _SCRIPTS for low, high in ranges)
_EDGES = np.array([edge for low, high, _ in _RANGES for edge in (low, high + 1)], dtype=np.uint32)
_RANGE_SCRIPTS = [name for _, _, name in _RANGES]
SCRIPT_SAMPLE = 2_000
# Han characters carry a word each, Latin letters a fraction of one: a Chinese
# text that quotes English names is still Chinese.
HAN_SHARE = 0.2


def script_of(text: str) -> str:
    """The writing system a text is mostly in: han, kana, hangul, cyrillic, arabic, latin, or '' (none).

    A cheap stand-in for its language: embedders score pairs of texts in one
    language on a different scale than pairs across languages.
    """
    codes = np.frombuffer(text[:SCRIPT_SAMPLE].encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    inside = np.bincount(np.searchsorted(_EDGES, codes, side="right"), minlength=len(_EDGES) + 1)[1::2]
    counts = dict.fromkeys(SCRIPTS[:-1], 0)
    for name, letters_in_range in zip(_RANGE_SCRIPTS, inside.tolist()):
        counts[name] += letters_in_range
    letters = sum(counts.values())
    if not letters:
        return ""
    if counts["kana"] >= 0.2 * letters:  # Japanese writes its particles in kana; Chinese may quote a kana name
        return "kana"
    if counts["hangul"] >= 0.2 * letters:
        return "hangul"
    if counts["han"] >= HAN_SHARE * letters:
        return "han"
    return max(counts, key=lambda name: (counts[name], name))
