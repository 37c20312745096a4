"""jieba's search mode (`cut_for_search`, HMM on) for a run of Chinese characters: the same words, faster.

Keyword documents segment every Chinese run of every saved text, and jieba's
own `cut_for_search` spends most of its time in its layers rather than its
algorithm: per run a generator for `cut_for_search`, one for `cut`, one for
`__cut_DAG`, a dict for the DAG, a dict of tuples for the route and a
generator expression per character for `calc`. This is the same algorithm
over the same dictionary (`FREQ`, `total` of jieba's default tokenizer, read
on every call, so words added to jieba count) in one function: the DAG is
walked while the route is computed (backwards, with jieba's arithmetic in
jieba's order, and its tie-break: the longer word), and unknown stretches go
to jieba's own HMM (`finalseg.cut`). tests/knowledge/search/test_jieba_search.py
holds it to `jieba.cut_for_search` word for word over CMRC 2018 and XQuAD-R
passages and edge cases; about 2.5x faster on the bench's texts.
"""
import re
from math import log

# jieba's Han block (re_han_default, less the Latin letters, digits and marks our runs never hold):
# characters outside it (CJK extension A, compatibility ideographs) are words of one character.
_HAN_BLOCK = re.compile("([\u4E00-\u9FD5]+)")


def cut_for_search(run: str, tokenizer) -> list[str]:
    """`tokenizer.cut_for_search(run)` as a list, for `run` a string of Chinese characters (no spaces, letters)."""
    from jieba import finalseg

    freq = tokenizer.FREQ
    logtotal = log(tokenizer.total)
    words = []
    for block in _HAN_BLOCK.split(run):
        if not block:
            continue
        if _HAN_BLOCK.match(block):
            _cut_block(block, freq, logtotal, finalseg.cut, words)
        else:
            words.extend(block)
    out = []
    for w in words:
        n = len(w)
        if n > 2:
            out.extend(gram for gram in (w[i : i + 2] for i in range(n - 1)) if freq.get(gram))
        if n > 3:
            out.extend(gram for gram in (w[i : i + 3] for i in range(n - 2)) if freq.get(gram))
        out.append(w)
    return out


def _cut_block(sentence: str, freq: dict, logtotal: float, hmm_cut, words: list) -> None:
    """jieba's `__cut_DAG` (get_DAG, calc, then the route with unknown stretches given to the HMM), into `words`."""
    n = len(sentence)
    score = [0.0] * (n + 1)  # jieba's route[x][0]; route[n] = (0, 0)
    end = [0] * (n + 1)  # jieba's route[x][1]: where the best word starting at x ends
    get = freq.get
    for k in range(n - 1, -1, -1):
        best, best_end = None, k
        i, count = k, get(sentence[k])
        while count is not None:  # the DAG's edges from k: prefixes of words (count 0), words
            if count:
                s = log(count) - logtotal + score[i + 1]
                if best is None or s >= best:  # max over (score, end): a tie goes to the later end
                    best, best_end = s, i
            i += 1
            count = get(sentence[k : i + 1]) if i < n else None
        if best is None:  # no word starts here: the character alone, frequency 1 (jieba's `or 1`)
            best = log(freq.get(sentence[k]) or 1) - logtotal + score[k + 1]
        score[k], end[k] = best, best_end
    x, buf = 0, ""
    while x < n:
        y = end[x] + 1
        if y - x == 1:
            buf += sentence[x]
        else:
            if buf:
                _flush(buf, freq, hmm_cut, words)
                buf = ""
            words.append(sentence[x:y])
        x = y
    if buf:
        _flush(buf, freq, hmm_cut, words)


def _flush(buf: str, freq: dict, hmm_cut, words: list) -> None:
    """A stretch of single characters: one character as is, an unknown word through the HMM, a known one split."""
    if len(buf) == 1:
        words.append(buf)
    elif not freq.get(buf):
        words.extend(hmm_cut(buf))
    else:
        words.extend(buf)
