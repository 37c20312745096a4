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
through jieba's HMM (`finalseg`'s model and Viterbi, its loop over states
written out). tests/knowledge/search/test_jieba_search.py
holds it to `jieba.cut_for_search` word for word over CMRC 2018 and XQuAD-R
passages and edge cases; twice as fast over the bench's 64,780 Chinese runs, and
another ~11% from a run that is one Han block taken whole, the search mode's
two- and three-character words checked in plain loops and the HMM's back
pointers kept as tuples.

Where jieba's dictionary is the one it ships, unchanged (`uses_shipped_dictionary`),
the route through each Han block comes from jieba-rs (`rjieba`, the same dictionary
compiled into a Rust port): its `cut` without the HMM is that route word for word.
The single characters between the route's words still go through the HMM here, and
the search mode's short words are still checked here, against jieba's `FREQ`: the
Rust port's own HMM differs from jieba's on a few stretches (常在较: jieba 常/在/较,
jieba-rs 常在/较), its route does not. About 2.3x faster over the same runs.
"""
import re
from math import log

try:
    import rjieba
except ImportError:  # a platform without its wheel: every route is computed here
    rjieba = None

# jieba's Han block (re_han_default, less the Latin letters, digits and marks our runs never hold):
# characters outside it (CJK extension A, compatibility ideographs) are words of one character.
_HAN_BLOCK = re.compile("([\u4E00-\u9FD5]+)")
_HAN_BLOCK_ONLY = re.compile("[\u4E00-\u9FD5]+")


# jieba 0.42's dictionary as it loads (FREQ's words and prefixes, and their total count): the one jieba-rs ships.
SHIPPED_DICTIONARY = (498_113, 60_101_967)


def uses_shipped_dictionary(tokenizer) -> bool:
    """Whether `tokenizer` holds jieba's own dictionary as loaded (`add_word` and `del_word` change its size or its
    total; another dictionary has another size), so that jieba-rs, which ships it, finds the same route."""
    return (len(tokenizer.FREQ), tokenizer.total) == SHIPPED_DICTIONARY


def cut_for_search(run: str, tokenizer, *, rust: bool | None = None) -> list[str]:
    """`tokenizer.cut_for_search(run)` as a list, for `run` a string of Chinese characters (no spaces, letters).

    The route through each block comes from jieba-rs when `rust` (by default: when it is installed and the
    tokenizer holds the dictionary it ships), otherwise from `_cut_block`."""
    freq = tokenizer.FREQ
    if rust is None:
        rust = rjieba is not None and uses_shipped_dictionary(tokenizer)
    if rust:
        cut_block = _cut_block_on_rust_route
    else:
        logtotal = log(tokenizer.total)

        def cut_block(block, freq, hmm_cut, words):
            _cut_block(block, freq, logtotal, hmm_cut, words)
    words = []
    if _HAN_BLOCK_ONLY.fullmatch(run):  # the common case: one block
        cut_block(run, freq, _hmm_cut, words)
    else:
        for block in _HAN_BLOCK.split(run):
            if not block:
                continue
            if _HAN_BLOCK.match(block):
                cut_block(block, freq, _hmm_cut, words)
            else:
                words.extend(block)
    out = []
    get = freq.get
    for w in words:
        n = len(w)
        if n > 2:
            for i in range(n - 1):
                if get(w[i : i + 2]):
                    out.append(w[i : i + 2])
            if n > 3:
                for i in range(n - 2):
                    if get(w[i : i + 3]):
                        out.append(w[i : i + 3])
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


def _cut_block_on_rust_route(block: str, freq: dict, hmm_cut, words: list) -> None:
    """`_cut_block` with jieba-rs's route: its words as they are, each stretch of single characters `_flush`ed."""
    buf = ""
    for word in rjieba.cut(block, False):
        if len(word) == 1:
            buf += word
            continue
        if buf:
            _flush(buf, freq, hmm_cut, words)
            buf = ""
        words.append(word)
    if buf:
        _flush(buf, freq, hmm_cut, words)


def _flush(buf: str, freq: dict, hmm_cut, words: list) -> None:
    """A stretch of single characters: one character as is, an unknown word through the HMM, a known one split."""
    if len(buf) == 1:
        words.append(buf)
    elif not freq.get(buf):
        hmm_cut(buf, words)
    else:
        words.extend(buf)


def _hmm_cut(sentence: str, words: list) -> None:
    """jieba's `finalseg.cut` of a stretch of Han characters (its Viterbi over the states B, M, E, S), into `words`.

    jieba's model (start, transition and emission log-probabilities, read on every call) and arithmetic,
    in jieba's order; the loop over states and their predecessors (finalseg.PrevStatus: B after E or S,
    M after M or B, E after B or M, S after S or E) is written out, and the best path is kept as back
    pointers (a tuple per character, the states numbered B 0, M 1, E 2, S 3) instead of a list copied per
    character. jieba picks the best (probability, state) pair,
    so a tie goes to the later letter: S over E, M over B.
    """
    from jieba import finalseg

    emit, trans, low = finalseg.emit_P, finalseg.trans_P, finalseg.MIN_FLOAT
    e_b, e_m, e_e, e_s = emit["B"], emit["M"], emit["E"], emit["S"]
    t_eb, t_sb = trans["E"].get("B", low), trans["S"].get("B", low)
    t_mm, t_bm = trans["M"].get("M", low), trans["B"].get("M", low)
    t_be, t_me = trans["B"].get("E", low), trans["M"].get("E", low)
    t_ss, t_es = trans["S"].get("S", low), trans["E"].get("S", low)
    first, start = sentence[0], finalseg.start_P
    v_b, v_m = start["B"] + e_b.get(first, low), start["M"] + e_m.get(first, low)
    v_e, v_s = start["E"] + e_e.get(first, low), start["S"] + e_s.get(first, low)
    back = []  # per character after the first: the predecessors of B, M, E, S (0, 1, 2, 3)
    append = back.append
    for char in sentence[1:]:
        em = e_b.get(char, low)
        from_e, from_s = v_e + t_eb + em, v_s + t_sb + em
        n_b, p_b = (from_e, 2) if from_e > from_s else (from_s, 3)
        em = e_m.get(char, low)
        from_m, from_b = v_m + t_mm + em, v_b + t_bm + em
        n_m, p_m = (from_m, 1) if from_m >= from_b else (from_b, 0)
        em = e_e.get(char, low)
        from_b, from_m = v_b + t_be + em, v_m + t_me + em
        n_e, p_e = (from_m, 1) if from_m >= from_b else (from_b, 0)
        em = e_s.get(char, low)
        from_s, from_e = v_s + t_ss + em, v_e + t_es + em
        n_s, p_s = (from_s, 3) if from_s >= from_e else (from_e, 2)
        v_b, v_m, v_e, v_s = n_b, n_m, n_e, n_s
        append((p_b, p_m, p_e, p_s))
    state = 2 if v_e > v_s else 3
    states = [state]
    for step in reversed(back):
        state = step[state]
        states.append(state)
    states.reverse()
    split, begin, after = finalseg.Force_Split_Words, 0, 0
    for i, state in enumerate(states):
        if state == 0:
            begin = i
        elif state >= 2:  # E or S
            word = sentence[begin : i + 1] if state == 2 else sentence[i]
            words.extend(word if word in split else (word,))
            after = i + 1
    if after < len(sentence):
        word = sentence[after:]
        words.extend(word if word in split else (word,))
