"""Small helpers shared by every command: the error type users see, safe file reads and
writes, did-you-mean suggestions and the id and hash forms.

Kept free of heavy imports: `kb search` loads this module on its start-up path.
"""
from __future__ import annotations

import os


class KBError(Exception):
    """A failure the user can act on: `kb` prints it as one line on stderr and exits with
    `exit_code` (1: not found, invalid KB, a failed check), never with a traceback."""

    exit_code = 1


def invalid_kb(problems) -> str | None:
    """The one line an invalid KB stops a command with (None when it is valid): the first problem,
    and how many more `kb check` lists."""
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more; run `kb check`)" if len(problems) > 1 else " (run `kb check`)"
    return f"the KB is invalid: {problems[0]}{more}"


class UsageError(KBError):
    """The command was called wrongly (a bad option value, an empty query): exit 2."""

    exit_code = 2


_KEBAB_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def is_kebab_id(name: str) -> bool:
    """Lower-case letters, digits and single inner hyphens: the form of every id."""
    return bool(name) and set(name) <= _KEBAB_CHARS and not name.startswith("-") \
        and not name.endswith("-") and "--" not in name


HEX_DIGITS = frozenset("0123456789abcdef")


def is_hex(value, digits: int) -> bool:
    """`value` is exactly `digits` lower-case hex digits (a git commit is 40, a sha256 64)."""
    return isinstance(value, str) and len(value) == digits and set(value) <= HEX_DIGITS


def did_you_mean(name: str, choices) -> str:
    """" (did you mean 'x'?)" for the closest of `choices`, or "" when none is close."""
    import difflib
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    Opened without blocking and checked with fstat before reading, so a FIFO,
    a device such as /dev/zero or a folder raises OSError instead of hanging or
    filling memory; a file larger than `limit` raises ValueError.
    """
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file: {path}")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes, more than the limit of {limit}")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, max(st.st_size + 1, 65536)))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise ValueError(f"more than the limit of {limit} bytes")
        return data
    finally:
        os.close(fd)


def write_atomic(path: str, data, exclusive: bool = False) -> None:
    """Replace `path` with `data` (str, written as UTF-8, or bytes): readers see the old file or
    the new one, never half of one. An existing file keeps its permissions. Raises OSError.
    With `exclusive`, `path` must not exist yet (FileExistsError otherwise): of two writers
    racing to create it, exactly one succeeds, and the file appears complete."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    # A fresh name, created exclusively: two writers (threads or processes) never share a
    # temporary file, and a link or FIFO planted at that name is never followed.
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except OSError:
            pass  # a new file: the default permissions
        if exclusive:
            os.link(tmp, path)  # fails if `path` exists, atomically
            os.remove(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- entry mentions in prose

# The prose fields of an entry: the site links entry mentions in these, `kb check` reports dead ones.
PROSE_FIELDS = ("cause", "fix", "check", "caveats", "correction", "snippet_note", "evidence_note")
# Patterns as text: `re` is imported where they are used, never on the cached search path
# (re's own cache keeps the compiled forms).
_CODE_SPAN = r"(`+)(.+?)\1"
_WORD = r"(?<![\w./-])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*(?![\w/-]|\.\w)"
_KEBAB_WORD = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+\Z"
_SEE = r"\bsee\s+\Z"


def prose_words(text: str):
    """(word, in_code, code_is_word, start) for each whole word of `text` that could name an entry
    (letters and digits, optionally joined by single hyphens). `in_code`: the word sits in a
    `code span`; `code_is_word`: that span holds nothing but the word. A word inside a path,
    a dotted name or a longer hyphenated word is not whole (`/entries/nan-loss/`, `nan-loss.yaml`)."""
    import re
    word = re.compile(_WORD)
    pos = 0
    spans = [(m.start(), m.end(), m.group(2).strip()) for m in re.finditer(_CODE_SPAN, text, re.S)]
    for start, end, inner in spans + [(len(text), len(text), None)]:
        for m in word.finditer(text, pos, start):
            yield m.group(0), False, False, m.start()
        if inner is not None:
            for m in word.finditer(inner):
                yield m.group(0), True, m.group(0) == inner, start
        pos = end


def dead_mentions(text: str, known) -> list:
    """Words of prose that name an entry the KB does not have (KB025): a code span holding only
    a kebab-case word (`lr-too-low`), or a kebab-case word right after "see". Both forms are
    how entries name each other; other hyphenated words (`micro-batch`) are ordinary prose."""
    import re
    kebab, see = re.compile(_KEBAB_WORD), re.compile(_SEE, re.I)
    out = []
    for word, in_code, whole, start in prose_words(text):
        if word in known or not kebab.match(word):
            continue
        if (in_code and whole) or (not in_code and see.search(text, max(0, start - 12), start)):
            out.append(word)
    return list(dict.fromkeys(out))


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 line', '3 lines' ('3 matches' with many="matches")."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "cf.", "vs.")
TODO_CHARS = 220  # a longer first sentence is cut at its first colon or semicolon


def first_sentence(text, limit: int = TODO_CHARS) -> str:
    """The first sentence of a prose field, for one-line summaries (the entry page's "what to do",
    `kb search`'s "tell apart" check):
    a period inside a code span or after "e.g." does not end it, and a sentence over TODO_CHARS
    stops at its first colon or semicolon (the rest is under Fix); `limit` sets that length."""
    import re  # here, not at the top: `kb search` loads this module on its start-up path
    text = " ".join(str(text or "").split())
    spans = [m.span() for m in re.finditer(r"(`+)(.+?)\1", text, re.S)]

    def in_code(at: int) -> bool:
        return any(a < at < b for a, b in spans)

    end = len(text)
    for m in re.finditer(r"(?<=[.!?])\s+(?=[A-Z(`\[])", text):
        before = text[:m.start()].rsplit(None, 1)[-1].lower()
        if not in_code(m.start()) and before not in _ABBREVIATIONS:
            end = m.start()
            break
    sentence = text[:end]
    if len(sentence) > limit:
        cut = next((m.start() for m in re.finditer(r"[:;] ", sentence) if m.start() >= 30 and not in_code(m.start())), None)
        if cut is not None:
            sentence = sentence[:cut] + "."
    return sentence


TELL_APART_CHARS = 80  # a check's first sentence shorter than this ("Three measurements, in order.") says too little
TELL_APART_LIMIT = 320  # a longer sentence is cut at its first colon or semicolon, as first_sentence cuts


def check_line(text) -> str:
    """An entry's check as one line for `kb search`'s "tell apart": its first sentence, and the next
    ones while the line is under TELL_APART_CHARS (each sentence cut as first_sentence cuts it)."""
    text = " ".join(str(text or "").split())
    line = ""
    while text and len(line) < TELL_APART_CHARS:
        sentence = first_sentence(text, TELL_APART_LIMIT)
        if not text.startswith(sentence):  # cut at a colon or semicolon: keep that mark and go on after it
            sentence = text[:len(sentence)]
        line = f"{line} {sentence}".strip()
        text = text[len(sentence):].strip()
    return line[:-1] + "." if line.endswith((":", ";")) else line
