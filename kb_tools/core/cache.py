"""The on-disk caches: a validated KB and the tables derived from it (the search index).

Each cache file is sealed: framed with its length and a crc32 that is checked on
every read, so a truncated, overwritten or bit-flipped file is rebuilt, never
trusted. Keys are the KB files' signature (see locate.kb_signature): any write to
a KB file makes every cache stale. Only `cached_table` builds anything from a KB, through
the `build` its caller passes (which loads the KB on a miss alone: this module imports no
parser, so the cache sits below the loader).
"""
from __future__ import annotations

import os

from kb_tools.core.locate import find_kb_root, kb_signature
from kb_tools.core.util import read_regular, write_atomic


def cache_dir() -> str:
    """Where every cache lives: $KB_CACHE_DIR, else $XDG_CACHE_HOME/kb-tools, else ~/.cache/kb-tools."""
    return os.environ.get("KB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kb-tools")


def path_for(kb_root: str, name: str) -> str:
    """The cache file `name` of the KB at `kb_root`."""
    base = cache_dir()
    import zlib  # not hashlib: a name clash only costs a rebuild, since the stored key holds every path
    key = f"{zlib.crc32(kb_root.encode()):08x}{zlib.adler32(kb_root.encode()):08x}"
    return os.path.join(base, f"{key}.{name}.marshal")


def enabled() -> bool:
    """Caches are used unless $KB_NO_CACHE is set."""
    return not os.environ.get("KB_NO_CACHE")


def read_value(path: str, key):
    """The value stored under `key`, or None when absent, damaged or stale."""
    import marshal
    data = read_sealed(path)
    if data is None:
        return None
    try:
        stored_key, value = marshal.loads(data)
        return value if stored_key == key else None
    except (EOFError, ValueError, TypeError):
        return None


def write_value(path: str, key, value) -> None:
    """Store `value` under `key`; a value marshal cannot hold is simply not cached."""
    import marshal
    try:
        data = marshal.dumps((key, value))
    except ValueError:  # a value marshal cannot hold: no cache, never a failed command
        return
    _write_bytes(path, seal(data))


# A cache file is: magic, payload length, crc32 of the payload, payload. The checksum is of
# what was written and is checked on every read, so a truncated, overwritten or bit-flipped
# cache is rebuilt instead of trusted (crc32, not a cryptographic hash: the cache guards
# against damage, and anyone who can write the cache folder can also write the KB).
_SEAL_MAGIC = b"KBS1"
_SEAL_HEAD = len(_SEAL_MAGIC) + 12
MAX_CACHE_BYTES = 1 << 30


def seal(payload: bytes) -> bytes:
    """`payload` framed with its length and checksum, for read_sealed."""
    import zlib
    return b"".join([_SEAL_MAGIC, len(payload).to_bytes(8, "little"),
                     zlib.crc32(payload).to_bytes(4, "little"), payload])


def read_sealed(path: str, prefix: bytes = b""):
    """The payload of a file written as `seal(payload)`, or None when the file is missing,
    not a regular file, too large, or does not hold exactly what was written. When
    `prefix` is given, a payload that does not start with it is None before any checksum."""
    import zlib
    try:
        data = read_regular(path, MAX_CACHE_BYTES)
    except (OSError, ValueError):
        return None
    if len(data) < _SEAL_HEAD or data[:len(_SEAL_MAGIC)] != _SEAL_MAGIC:
        return None
    if int.from_bytes(data[4:12], "little") != len(data) - _SEAL_HEAD:
        return None
    payload = memoryview(data)[_SEAL_HEAD:]
    if payload[:len(prefix)] != prefix:
        return None  # stale: skip the checksum
    if zlib.crc32(payload) != int.from_bytes(data[12:16], "little"):
        return None
    return payload


def _write_bytes(path: str, data: bytes) -> None:
    """A cache file, atomically; an unwritable cache only costs speed."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, data)
    except OSError:
        return
    prune(os.path.dirname(path))


STALE_DAYS = 30
PER_KB_FILE = r"[0-9a-f]{16}\.[a-z-]+\.marshal"  # what path_for names


def prune(folder: str, stale_days: float = STALE_DAYS) -> int:
    """Remove the per-KB cache files in `folder` not written for `stale_days`; how many went.

    Every clone, worktree or temporary checkout of a KB gets cache files of its own, and
    a deleted checkout's would stay forever. Run after each write (a cache miss, already
    the slow path). Files are rewritten only when their KB changes, so a KB in use but
    unchanged for that long pays one rebuild. Only regular files named as path_for names
    them are touched; the per-embedder vector caches are left alone.
    """
    import re
    import stat
    import time
    cutoff = time.time() - stale_days * 86400
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if not re.fullmatch(PER_KB_FILE, name):
            continue
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                os.unlink(path)
                removed += 1
        except OSError:  # gone already, or not ours to remove: the next prune tries again
            pass
    return removed


class Table:
    """A header plus records that are decoded only when asked for.

    A large KB's search index is mostly postings and symptom lines that one
    query never touches; keeping each record as its own marshal blob makes
    opening the index cost one read, one checksum and the header alone.
    Record keys are (kind, name) pairs; on disk the offsets are one dict per
    kind of name -> start << 32 | end, which decodes in half the time of a
    dict keyed by tuples.
    """

    __slots__ = ("header", "_records", "_blob", "_offsets")

    def __init__(self, header: dict, records: dict | None = None, blob=None, offsets: dict | None = None):
        self.header, self._records, self._blob = header, records, blob
        self._offsets: dict = offsets if offsets is not None else {}  # read only when there are no records

    def has(self, key) -> bool:
        if self._records is not None:
            return key in self._records
        return key[1] in self._offsets.get(key[0], ())

    def names(self, kind) -> list:
        """The names of every record of `kind`, in the order they were written."""
        if self._records is not None:
            return [name for k, name in self._records if k == kind]
        return list(self._offsets.get(kind, ()))

    def get(self, key, default=None):
        if self._records is not None:
            return self._records.get(key, default)
        span = self._offsets.get(key[0], {}).get(key[1])
        if span is None:
            return default
        import marshal
        return marshal.loads(self._blob[span >> 32:span & 0xFFFFFFFF])


_TABLE_MAGIC = b"KBT3"


def open_table(path: str, key: bytes) -> Table | None:
    """The table in `path` if it was written for `key` and is intact, else None.

    Read into memory, not mapped: a mapped file that another process truncates
    kills the reader with SIGBUS, and the checksum has to read every byte anyway.
    """
    import marshal
    prefix = _TABLE_MAGIC + len(key).to_bytes(8, "little") + key
    blob = read_sealed(path, prefix)
    if blob is None:
        return None
    try:
        at = len(prefix)
        head_len = int.from_bytes(blob[at:at + 8], "little")
        header, offsets = marshal.loads(blob[at + 8:at + 8 + head_len])
        base = at + 8 + head_len
        return Table(header, blob=blob[base:], offsets=offsets)
    except (ValueError, EOFError, TypeError):
        return None


def write_table(path: str, key: bytes, header: dict, records: dict) -> None:
    """Store a table as magic, key, header and record blobs (see open_table); best effort."""
    import marshal
    chunks, offsets, at = [], {}, 0
    try:
        for (kind, name), value in records.items():
            data = marshal.dumps(value)
            if at + len(data) > 0xFFFFFFFF:
                return  # beyond what an offset holds (and MAX_CACHE_BYTES): serve from memory
            offsets.setdefault(kind, {})[name] = at << 32 | (at + len(data))
            chunks.append(data)
            at += len(data)
        head = marshal.dumps((header, offsets))
    except ValueError:  # not marshal-able: serve from memory, cache nothing
        return
    _write_bytes(path, seal(b"".join([_TABLE_MAGIC, len(key).to_bytes(8, "little"), key,
                                      len(head).to_bytes(8, "little"), head, *chunks])))


def table_key(version, signature: tuple) -> bytes:
    """The bytes a cached table is stored under, compared as bytes. Marshal format 2: from
    format 3 on, marshal marks every object that something else also references, so an equal
    signature could give other bytes in another process (or later in this one) and turn a
    sound cache into a rebuild."""
    import marshal
    return marshal.dumps((version, signature), 2)


def cached_table(kb_root: str | None, name: str, version, build, stale=None) -> Table:
    """`Table(*build(kb))` for the KB at `kb_root`, cached until any KB file changes.

    For data derived from the whole KB (the search index) that a command needs
    without the KB itself: on a hit the KB is not even loaded. `build(root, use_cache)`
    loads the KB at `root` and returns (header, records), both plain and marshal-able.
    The file is seal(magic, key length, key, header length, header, record
    blobs); the key (the files' signature) is compared as bytes, never decoded,
    and the checksum is checked before anything is decoded. `stale(header)`, when
    given, may reject a sound cached table that no longer fits the process.
    """
    root = find_kb_root(kb_root)
    if not enabled():
        return Table(*build(root, False))
    key = table_key(version, kb_signature(root))
    path = path_for(root, name)
    table = open_table(path, key)
    if table is None or (stale is not None and stale(table.header)):
        header, records = build(root, True)  # only on a miss: a cached search never imports the parser
        write_table(path, key, header, records)
        table = Table(header, records)
    return table
