"""Segmenting many texts together (the bulk path) gives each text what segmenting it alone gives."""
import pytest

from knowledge.search import text

TEXTS = [
    "导出本月订单数据的流程",
    "在后台订单页选择月份，点击导出 CSV。导出本月订单数据的流程",
    "plain English, no Chinese at all",
    "",
    "他来到了网易杭研大厦 and 㐀𠀀並列 retry 重试 HTTP 请求",
    "的的的，是是是。",
    "导出本月订单数据的流程",
]


def test_segment_many_gives_each_text_what_segment_gives():
    assert text.segment_many(TEXTS) == [text.segment(t) for t in TEXTS]


def test_a_batch_without_chinese_comes_back_as_it_is():
    assert text.segment_many(["plain", "", "E1101 undetected_chromedriver"]) == ["plain", "", "E1101 undetected_chromedriver"]


def test_texts_are_cut_to_the_same_length_as_alone(monkeypatch):
    monkeypatch.setattr(text, "MAX_TEXT", 12)
    long = "导出本月订单数据的流程导出本月订单数据的流程"
    assert text.segment_many([long, "短"]) == [text.segment(long), text.segment("短")]


def test_a_run_that_recurs_in_the_batch_is_cut_once(monkeypatch):
    cuts = []
    real = text.cut_for_search
    monkeypatch.setattr(text, "cut_for_search", lambda run, tokenizer: cuts.append(run) or real(run, tokenizer))
    text.segment_many(["导出本月订单数据的流程，点击导出", "导出本月订单数据的流程", "点击导出"])
    assert sorted(cuts) == sorted(["导出本月订单数据的流程", "点击导出"])


def test_a_model_service_is_asked_in_requests_of_bounded_size_and_the_order_is_kept(monkeypatch, settings):
    from knowledge.search import model_client

    settings.KNOWHUB_MODEL_SERVICE = "/nonexistent/models.sock"
    monkeypatch.setattr(text, "SERVICE_CHARS", 30)
    requests = []

    def answered(request, local):
        requests.append(request)
        return text.segment_many_here(request["texts"])

    monkeypatch.setattr(model_client, "text_call", answered)
    batch = TEXTS * 3
    assert text.segment_many(batch) == [text.segment_here(t) for t in batch]
    assert len(requests) > 1 and [t for r in requests for t in r["texts"]] == batch
    assert all(r["op"] == "segment_many" for r in requests)
    assert all(sum(map(len, r["texts"])) <= 30 or len(r["texts"]) == 1 for r in requests)


def test_words_added_to_jieba_count_in_the_next_batch(monkeypatch):
    tokenizer = text._jieba().dt
    run = "蓝鲸知识库很好用"
    before = text.segment_many([run])
    monkeypatch.setitem(tokenizer.FREQ, "蓝鲸知识库", 50_000)  # restored after the test
    for n in range(1, 5):
        monkeypatch.setitem(tokenizer.FREQ, run[:n], tokenizer.FREQ.get(run[:n], 0))
    after = text.segment_many([run])
    assert "蓝鲸知识库" not in before[0].split() and "蓝鲸知识库" in after[0].split()


@pytest.mark.parametrize("task, content, tags", [
    ("导出本月订单数据的流程", "在后台订单页选择月份，点击导出 CSV。", {"tool": "admin", "语言": "中文"}),
    ("Fix ERR_CONNECTION_RESET in undetected_chromedriver", "Rotate proxies; E1101 is harmless.", {}),
    ("", "", None),
])
def test_document_parts_of_a_batch_are_each_items_own(task, content, tags):
    from knowledge.search import keyword

    batch = [(task, content, tags), ("导出本月订单数据的流程", "点击导出", {"k": 1})]
    assert keyword.document_parts_many(batch)[0] == keyword.document_parts(task=task, content=content, tags=tags)
    assert keyword.document_parts(task=task, content=content, tags=tags) == (
        text.segment(task), text.segment(content), text.segment(" ".join(str(v) for v in (tags or {}).values())),
        text.identifiers(f"{task}\n{content}\n{' '.join(str(v) for v in (tags or {}).values())}"))


SCRIPT_PATTERNS = {  # the letters of each writing system, as regular expressions (what script_of counts)
    "kana": r"[\u3040-\u30ff]", "hangul": r"[\uac00-\ud7af\u1100-\u11ff]", "han": r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]",
    "cyrillic": r"[\u0400-\u04ff]", "arabic": r"[\u0600-\u06ff]", "latin": r"[A-Za-z\u00c0-\u024f]",
}


def script_by_patterns(sample: str) -> str:
    """script_of's rule over counts taken with regular expressions."""
    import re

    counts = {name: len(re.findall(pattern, sample[:text.SCRIPT_SAMPLE])) for name, pattern in SCRIPT_PATTERNS.items()}
    letters = sum(counts.values())
    if not letters:
        return ""
    for name, share in (("kana", 0.2), ("hangul", 0.2), ("han", text.HAN_SHARE)):
        if counts[name] >= share * letters:
            return name
    return max(counts, key=lambda name: (counts[name], name))


@pytest.mark.parametrize("sample", [
    "", "1234 !?", "plain English", "导出本月订单数据的流程 with an English name", "English with one 中文 word in it",
    "カタカナとひらがなの文", "한국어 문장입니다", "Русский текст", "نص عربي", "Ça déjà vu, Ÿ ɏ",
    "\x00\x01\x02\x03 control characters are no letters",
    "@[`{\u00bf\u0250\u303f\u3100\u33ff\u4dc0\u9fff\ufb00\u10ff\u1200\u03ff\u0500\u05ff\u0700",  # just outside or at the ranges' edges
    "a" * 1999 + "中中中中中中中中", "中" * 300 + "a" * 1700,
    "a lone surrogate \ud800 and an emoji \U0001F600 中文中文中文中文中文中文",
])
def test_script_of_counts_each_writing_systems_letters(sample):
    assert text.script_of(sample) == script_by_patterns(sample)


@pytest.mark.parametrize("sample, expected", [
    ("Fix ERR_CONNECTION_RESET in undetected_chromedriver (E1101, v2.3.1)", ["err_connection_reset", "undetected_chromedriver", "e1101", "v2.3.1"]),
    ("iPhone and macOS, not Title Case or lowercase words", ["iphone", "macos"]),
    ("path/to/file.py and http://x.y:8080/z, again path/to/file.py", ["path/to/file.py", "http://x.y:8080/z"]),
    ("a" * 101 + "1 is too long, b2 is not", ["b2"]),
    ("中文 E1101 中文", ["e1101"]),
])
def test_identifiers_are_the_marked_tokens_lower_cased_once_each(sample, expected):
    assert text.identifiers(sample) == expected
