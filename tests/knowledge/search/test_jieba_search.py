"""jieba_search.cut_for_search is jieba's cut_for_search, word for word, on either route (jieba-rs's or its own):
keyword documents depend on it."""
import itertools
import json

import pytest

from bench.datasets import DATA_DIR
from knowledge.search import text
from knowledge.search import jieba_search
from knowledge.search.jieba_search import cut_for_search, uses_shipped_dictionary

PASSAGES_PER_SET = 400


def chinese_runs(lines) -> list[str]:
    return [run for line in lines for run in text.CJK_RUN.findall(line)]


@pytest.fixture(scope="module")
def tokenizer():
    return text._jieba().dt


@pytest.mark.parametrize("rust", [True, False], ids=["jieba-rs route", "own route"])
@pytest.mark.parametrize("run", [
    "的", "中华人民共和国", "我来到北京清华大学", "小明硕士毕业于中国科学院计算所后在日本京都大学深造",
    "他来到了网易杭研大厦",  # an unknown word: the HMM's
    "一" * 40, "㐀", "㐀𠀀並列鿿", "中国㐀人民", "並", "𠀀中文",  # extension A/B, compatibility: not jieba's Han block
    "导出本月订单数据的流程", "在后台订单页选择月份", "点击导出",
])
def test_same_words_as_jieba_on_hard_cases(tokenizer, run, rust):
    assert cut_for_search(run, tokenizer, rust=rust) == list(tokenizer.cut_for_search(run))


@pytest.mark.parametrize("rust", [True, False], ids=["jieba-rs route", "own route"])
@pytest.mark.parametrize("folder", ["cmrc2018-dev-zh", "xquad-r-en-zh"])
def test_same_words_as_jieba_over_real_passages(tokenizer, folder, rust):
    path = DATA_DIR / folder / "corpus.jsonl"
    if not path.exists():
        pytest.skip(f"{folder} is not in ../shared/data")
    with open(path, encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh)
        lines = [f"{row.get('title', '')}\n{row['text']}" for row in itertools.islice(
            (row for row in rows if text.CJK_RUN.search(row["text"])), PASSAGES_PER_SET)]
    runs = chinese_runs(lines)
    assert len(runs) > 1_000
    assert [cut_for_search(run, tokenizer, rust=rust) for run in runs] == [
        list(tokenizer.cut_for_search(run)) for run in runs]


def test_jiebas_shipped_dictionary_takes_the_rust_route_and_a_changed_one_does_not(tokenizer, monkeypatch):
    assert jieba_search.rjieba is not None and uses_shipped_dictionary(tokenizer)
    taken = []
    monkeypatch.setattr(jieba_search, "_cut_block_on_rust_route", lambda *args: taken.append(args[0]))
    cut_for_search("我来到北京清华大学", tokenizer)
    assert taken == ["我来到北京清华大学"]
    monkeypatch.setattr(tokenizer, "total", tokenizer.total + 50_000)  # as add_word leaves it
    assert cut_for_search("我来到北京清华大学", tokenizer) == list(tokenizer.cut_for_search("我来到北京清华大学"))
    assert taken == ["我来到北京清华大学"]


def test_words_added_to_jieba_count(tokenizer, monkeypatch):
    run = "蓝鲸知识库很好用"
    monkeypatch.setitem(tokenizer.FREQ, "蓝鲸知识库", 0)  # restored after the test; prefixes as add_word makes them
    for n in range(1, 5):
        monkeypatch.setitem(tokenizer.FREQ, run[:n], tokenizer.FREQ.get(run[:n], 0))
    monkeypatch.setitem(tokenizer.FREQ, "蓝鲸知识库", 50_000)
    assert "蓝鲸知识库" in cut_for_search(run, tokenizer)
    assert cut_for_search(run, tokenizer) == list(tokenizer.cut_for_search(run))


def test_words_jieba_forces_apart_are_split(tokenizer, monkeypatch):
    from jieba import finalseg

    run = "他来到了网易杭研大厦"
    assert "杭研" in cut_for_search(run, tokenizer)  # a word only the HMM finds
    monkeypatch.setattr(finalseg, "Force_Split_Words", {"杭研"})
    assert "杭研" not in cut_for_search(run, tokenizer)
    assert cut_for_search(run, tokenizer) == list(tokenizer.cut_for_search(run))
