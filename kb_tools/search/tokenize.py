"""Query and entry text as match terms: words lower-cased and lightly stemmed, stop words dropped,
phrases of the synonym table folded into one concept term.

Both sides of a match use these rules, and the docs site's search reads them by name
(site/search_export.py exports every public constant here to the browser), so the
JavaScript never holds a copy that could drift. On the hot path of `kb search`: str
methods only, no `re`.
"""
from __future__ import annotations

STOP_WORDS = frozenset("""
a an the of to in on at for from by with and or but if then than so as is are was were be been being
it its it's this that these those there here i me my we our you your he she they them their
do does did doing done have has had having can could would should will shall may might must
when while after before during about into over under again very just also only even still
what which who whom how why where all any some each other such more most much many few
get gets got getting seem seems seemed look looks looked like run runs running ran
""".split())

# Tokenising uses str methods, not `re`: importing `re` costs a cached search
# more than half of Python's own start-up on a slow machine.
WORD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789'._"
_TO_SPACE = {c: " " for c in range(0x250) if chr(c) not in WORD_CHARS + "+-/"}
SPECIAL_TOKENS = frozenset(("+inf", "-inf", "1/n", "-100"))  # meaningful as written: "-100" is ignore_index


def _space_ideographs(text: str) -> str:
    """Each CJK ideograph as a word of its own, as BERT splits them: Chinese has no spaces, and
    the synonym groups name Chinese terms as sequences of characters."""
    from kb_tools.search.embedders.wordpiece import is_cjk
    return "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in text)


def _raw_tokens(text: str):
    """Runs of letters, digits and inner `'._`, plus the few signed or slashed tokens of SPECIAL_TOKENS."""
    text = text.translate(_TO_SPACE)
    if not text.isascii():
        text = _space_ideographs(text)
    for chunk in text.split():
        if chunk.rstrip("._'") in SPECIAL_TOKENS:
            yield chunk.rstrip("._'")
            continue
        for piece in chunk.replace("+", " ").replace("-", " ").replace("/", " ").split():
            piece = piece.strip("._'")
            if piece:
                yield piece


# (suffix, replacement, shortest word it applies to), tried in order.
STEM_RULES = (("ies", "y", 5), ("ing", "", 6), ("ed", "", 5), ("es", "", 6), ("ly", "", 6), ("s", "", 4))


def stem(word: str) -> str:
    """A light, predictable suffix stripper: both sides of the match use it, so it need not be perfect."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl, min_len in STEM_RULES:
        if word.endswith(suffix) and len(word) >= min_len and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + repl
    return word


STOP_STEMS = frozenset(stem(w) for w in STOP_WORDS)  # "does" is compared as its stem "doe"


def stemmed_words(text: str) -> list:
    """Lower-cased, stemmed words; `loss.backward` gives the compound and its parts."""
    text = text.lower().replace("n't", " not").replace("\u2019", "'")
    out = []
    for raw in _raw_tokens(text):
        if "." in raw or "_" in raw:  # opt.zero_grad -> opt.zero_grad, opt, zero_grad, zero, grad
            out.append(raw)
            for segment in raw.split("."):
                if "_" in segment and segment != raw:
                    out.append(segment)
                out.extend(stem(p) for p in segment.replace("'", "_").split("_") if p)
        else:
            out.append(stem(raw))
    return out


def build_phrase_table(groups) -> dict:
    """(stemmed word, ...) -> concept term, for every phrase of every synonym group."""
    table = {}
    for group in groups:
        concept = "~" + "-".join(stemmed_words(group[0]))
        for phrase in group:
            key = tuple(stemmed_words(phrase))
            if key:
                table.setdefault(key, concept)
    return table


def terms(text: str, phrases: dict, longest: int) -> list:
    """The match terms of `text`: concept terms for known phrases, stemmed words otherwise."""
    words = stemmed_words(text)
    out, i = [], 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            concept = phrases.get(tuple(words[i:i + n]))
            if concept:
                out.append(concept)
                i += n
                break
        else:
            if words[i] not in STOP_STEMS:
                out.append(words[i])
            i += 1
    return out
