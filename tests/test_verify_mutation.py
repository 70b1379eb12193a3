"""Every shipped quote, mutated in each way a misquote happens (a word or a punctuation mark changed,
parts reordered, lines, source or author wrong), must be caught with the right kind;
every formatting-only variant must pass; every cached source changed by one byte is caught as
cache-changed. Also: the shipped KB is clean, and fast to verify."""
from __future__ import annotations

import collections
import os
import re
import shutil
import time

import pytest

from kb_tools.core.load import body_offset, load_kb
from kb_tools.core.model import Quote
from kb_tools.verify.quotes import _ELISION, _ENDS_ELIDED, Context, PackageTexts, check_quote, check_source, verify_kb

WORD = re.compile(r"\w+(?:['./\-]\w+)*")
# a word that is in no shipped source, so a swap or insertion always changes the text
ALIEN = "zebra"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The shipped KB and a context whose package-text cache lives in a private directory."""
    pytest.importorskip("torch")
    kb = load_kb(use_cache=False)
    assert kb.quotes, "the shipped KB has no quotes"
    return kb, Context(kb, PackageTexts(str(tmp_path_factory.mktemp("pkgcache"))))


def _clone(quote, **changes):
    data = quote.to_dict()
    data.update(changes)
    return Quote(**data)


def _interior(text):
    """Word matches, and the indexes of words that touch neither an end nor an elision mark
    (dropping a word next to `[...]` only widens the elision, which is not a misquote)."""
    words = list(WORD.finditer(text))
    edge = {0, len(words) - 1}
    for mark in _ELISION.finditer(text):
        before = [i for i, w in enumerate(words) if w.end() <= mark.start()]
        after = [i for i, w in enumerate(words) if w.start() >= mark.end()]
        edge.update(before[-1:] + after[:1])
    return words, [i for i in range(len(words)) if i not in edge]


def _other_author(quote, kb):
    """Whom a misattribution would name: for a retelling, the retold author; else another source's author."""
    source = kb.sources[quote.source]
    if source.kind == "secondary" and source.retells:
        return source.retells["author"]
    return next(s.author for s in kb.sources.values() if s.author != source.author)


def mutants(quote, kb):
    """(name, expected kind or None, mutated quote) for one quote: 8 defects, 4 benign variants."""
    text = quote.text
    words, inner = _interior(text)
    pick = words[inner[len(inner) // 2]] if inner else words[len(words) // 2]
    yield "word swapped", "words-changed", _clone(quote, text=text[:pick.start()] + ALIEN + text[pick.end():])
    yield "word dropped", "words-changed", _clone(quote, text=text[:pick.start()] + text[pick.end():].lstrip())
    yield "word inserted", "words-changed", _clone(quote, text=text[:pick.start()] + ALIEN + " " + text[pick.start():])

    parts = [p.strip() for p in _ELISION.split(text) if WORD.search(p)]
    if len(parts) < 2:  # no elision yet: make two parts at the middle word
        cut = words[len(words) // 2].start()
        parts = [text[:cut].strip(), text[cut:].strip()]
    yield "elided parts reversed", "out-of-order", _clone(quote, text=f"{parts[1]} [...] {parts[0]}")

    if quote.lines:
        yield "line range shifted", "wrong-lines", _clone(quote, lines=[quote.lines[0] + 3, quote.lines[1] + 3])
    else:  # a package quote's coordinate is its object
        yield "object changed", "wrong-lines", _clone(quote, object="torch.nn.MSELoss")

    body = _ENDS_ELIDED.sub("", text.rstrip())
    body_words = list(WORD.finditer(body))
    cut = body_words[-2 if len(body_words) > 3 else -1].start()
    yield "last words cut", "truncated", _clone(quote, text=body[:cut].rstrip(" ,;:-(\"'*`"))

    yield "source id changed", "unknown-source", _clone(quote, source=quote.source + "s")
    yield "attributed to another author", "wrong-author", _clone(quote, author=_other_author(quote, kb))

    pieces = text.split(" ")
    reflowed = "".join(p + ("\n" if i % 4 == 3 else "   ") for i, p in enumerate(pieces)).strip()
    yield "reflowed", None, _clone(quote, text=reflowed)
    curly = re.sub(r'"([^"]*)"', "\u201c\\1\u201d", text.replace("'", "\u2019").replace("...", "\u2026"))
    yield "curly quotes, ellipsis character", None, _clone(quote, text=curly)
    yield "emphasis", None, _clone(quote, text=text[:pick.start()] + "**" + pick.group(0) + "**" + text[pick.end():])
    yield "editorial insertion", None, _clone(quote, text=text[:pick.start()] + "[emphasis added] " + text[pick.start():])


# brackets (an elision or the editor's words): a mark next to one is the editor's, not compared
BRACKETS = re.compile(r"\[[^\]]*\]|\.\s?\.\s?\.|\u2026")
PUNCTUATION_MUTANTS = ("comma dropped", "period changed to comma", "comma added", "apostrophe dropped",
                       "quote mark dropped", "parenthesis dropped", "dashes for hyphens")


def _marks(text, pattern, word_after=True):
    """Offsets of the matches of `pattern` that stand between two words of one part of the quote:
    a word before it and (if `word_after`) a word after it, with no bracket in between, so that
    the change is inside what the check compares (a quote may start or stop at any mark)."""
    cuts = [m.span() for m in BRACKETS.finditer(text)]
    found = []
    for m in re.finditer(pattern, text):
        lo = max((end for _, end in cuts if end <= m.start()), default=0)
        hi = min((start for start, _ in cuts if start >= m.end()), default=len(text))
        if any(start < m.end() and m.start() < end for start, end in cuts):
            continue   # inside a bracket
        if WORD.search(text[lo:m.start()]) and (not word_after or WORD.search(text[m.end():hi])):
            found.append(m)
    return found


def punctuation_mutants(quote):
    """(name, expected kind, mutated quote) for each kind of punctuation misquote the quote has a
    place for: a mark dropped, changed or added between two of its words, each words-changed;
    and its hyphens typed as en and em dashes, which must pass."""
    text = quote.text

    def middle(found):
        return found[len(found) // 2] if found else None

    def edit(m, new):
        return _clone(quote, text=text[:m.start()] + new + text[m.end():])

    changed = "words-changed"
    if m := middle(_marks(text, r"(?<=[\w\"')\u201d\u2019]),(?=\s)")):
        yield "comma dropped", changed, edit(m, "")
    if m := middle(_marks(text, r"(?<=[\w\"')\u201d\u2019])\.(?=\s|$)", word_after=False)):
        yield "period changed to comma", changed, edit(m, ",")
    if m := middle(_marks(text, r"(?<=\w)(?= \w)")):
        yield "comma added", changed, edit(m, ",")
    if m := middle(_marks(text, r"(?<=\w)['\u2019](?=\w)|(?<=\ws)['\u2019](?=\s)")):
        yield "apostrophe dropped", changed, edit(m, "")
    if m := middle(_marks(text, r"[\"\u201c\u201d]")):
        yield "quote mark dropped", changed, edit(m, "")
    if m := middle(_marks(text, r"[()]")):
        yield "parenthesis dropped", changed, edit(m, "")
    if re.search(r"\w-\w| - ", text):
        dashed = re.sub(r"(?<=\w)-(?=\w)", "\u2013", text).replace(" - ", " \u2014 ")
        yield "dashes for hyphens", None, _clone(quote, text=dashed)


def test_every_mutant_is_caught_with_its_kind(shipped, capsys):
    kb, ctx = shipped
    counts, misses = collections.Counter(), []
    for quote in kb.quotes.values():
        variants = list(mutants(quote, kb))
        variants += list(punctuation_mutants(quote))
        for name, expected, mutant in variants:
            defect = check_quote(mutant, ctx)
            got = defect.kind if defect else None
            counts[(name, expected, got == expected)] += 1
            if got != expected:
                misses.append(f"{quote.id} / {name}: expected {expected}, got {got}: "
                              f"{defect.message if defect else 'passed'} | {mutant.text!r}")
    n = len(kb.quotes)
    with capsys.disabled():
        print(f"\nmutation test over {n} shipped quotes:")
        for (name, expected, ok), count in sorted(counts.items(), key=lambda kv: str(kv[0])):
            print(f"  {name:<34} -> {str(expected):<15} {'caught/passed' if ok else 'MISSED'}: {count}")
        caught = sum(c for (name, e, ok), c in counts.items() if ok and e and name not in PUNCTUATION_MUTANTS)
        marks = sum(c for (name, e, ok), c in counts.items() if ok and e and name in PUNCTUATION_MUTANTS)
        benign = sum(c for (_, e, ok), c in counts.items() if ok and e is None)
        print(f"  defect mutants caught with the right kind: {caught} (words, order, lines, source, author), "
              f"{marks} (punctuation); benign variants passed: {benign}")
    assert not misses, "\n".join(misses[:30])
    per_name = collections.Counter()
    for (name, _, _), count in counts.items():
        per_name[name.replace("object changed", "line range shifted")] += count
    marked = {name: per_name.pop(name, 0) for name in PUNCTUATION_MUTANTS}
    assert set(per_name.values()) == {n}, per_name  # every quote got every other mutant
    assert min(marked.values()) >= 5, marked        # each punctuation mutant found places in several quotes


def _one_byte_changed(data: bytes, start: int) -> bytes:
    """`data` with one ASCII letter of its body (from byte `start`) replaced by another."""
    mid = start + (len(data) - start) // 2
    at = next(i for i in list(range(mid, len(data))) + list(range(start, mid)) if chr(data[i]).isalpha()
              and data[i] < 128)
    return data[:at] + (b"q" if data[at] != ord("q") else b"z") + data[at + 1:]


def test_every_cached_source_changed_by_one_byte_is_caught(shipped, tmp_path, capsys):
    kb, _ = shipped
    base = tmp_path / "copy"
    shutil.copytree(kb.root, base / "kb")
    shutil.copytree(os.path.join(os.path.dirname(kb.root), "evidence"), base / "evidence")
    copy = load_kb(str(base / "kb"), use_cache=False)
    ctx = Context(copy, PackageTexts(None))
    caught, misses = 0, []
    for source in copy.sources.values():
        path = base / source.path
        data = path.read_bytes()
        assert check_source(source, ctx) is None, source.id   # clean before
        path.write_bytes(_one_byte_changed(data, body_offset(data, source.body_line)))
        found = check_source(source, Context(copy, PackageTexts(None)))
        path.write_bytes(data)
        if found is not None and found.kind == "cache-changed" and found.path == source.path:
            caught += 1
        else:
            misses.append(f"{source.id}: {found}")
    with capsys.disabled():
        print(f"\none-byte cache mutations: {caught} of {len(copy.sources)} sources caught as cache-changed")
    assert not misses, misses


def test_shipped_kb_is_clean_cold_and_with_package_texts_cached(shipped, tmp_path, monkeypatch, capsys):
    kb, ctx = shipped
    cache = tmp_path / "cache"
    cold_start = time.perf_counter()
    cold = verify_kb(kb, packages=PackageTexts(str(cache)))
    cold_s = time.perf_counter() - cold_start
    assert cold.ok(strict=True), "\n".join(str(d) for d in cold.defects + cold.unchecked)
    assert cold.packages.get("torch"), cold.packages
    fresh = load_kb(use_cache=False)
    runs = []
    for _ in range(3):  # best of three: on a busy CI machine one run can wait for a core
        warm_start = time.perf_counter()
        warm = verify_kb(fresh, packages=PackageTexts(str(cache)))
        runs.append(time.perf_counter() - warm_start)
    warm_s = min(runs)
    with capsys.disabled():
        print(f"\nverify {warm.quotes} shipped quotes: {warm_s * 1000:.0f} ms with package texts cached "
              f"(first run, reading torch {warm.packages['torch']}: {cold_s * 1000:.0f} ms)")
    assert warm.ok(strict=True) and warm.quotes == len(kb.quotes)  # speed is measured by bench/verify_speed.py


def test_shipped_kb_has_enough_quotes_and_sources(shipped):
    kb, _ = shipped
    cited = {q.source for q in kb.quotes.values()}
    assert len(kb.quotes) >= 60 and len(cited) >= 12
    for quote in kb.quotes.values():
        source = kb.sources[quote.source]
        assert bool(quote.object) == bool(source.package), quote.id  # packages by object, files by lines
        assert quote.themes, quote.id
    for source in kb.sources.values():  # each capture can be re-checked: a recorded hash, re-fetchable provenance
        assert source.sha256, f"{source.path} records no sha256"
        assert source.repo or source.package or source.retrieved, source.path
