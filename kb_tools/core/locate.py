"""Where a KB is and which files it has, and the signature that changes when any of them does.

Everything a cached search needs before it reads its index, kept apart from the
parser (load.py) and its schema so that the start-up path imports neither.
"""
from __future__ import annotations

import os
import sys

from kb_tools import PACKAGE_DIR
from kb_tools.core.util import KBError

# Part of every cache key. The code that shapes the cached data is stamped into the key as well
# (code_stamp: the modules' size and mtime), so an edit to the schema, the model or a rule rebuilds
# without anyone remembering a version; bump CACHE_FORMAT only for what no stamped module shows.
CACHE_FORMAT = 12
SCHEMA_MODULES = ("core/model.py", "core/load.py")  # the parsed KB's fields and rules

SYNONYMS_FILE = "synonyms.yaml"
TAGS_FILE = "tags.yaml"  # the tag vocabulary: tag -> one-line meaning


def find_kb_root(explicit: str | None = None) -> str:
    """The KB directory: --kb, else $KB_PATH, else the kb/ of the checkout that holds the
    working directory (found upward, as git finds .git), else this package's checkout,
    else the copy bundled with an installed package (read-only: see bundled_kb)."""
    for candidate, how in ((explicit, "--kb"), (os.environ.get("KB_PATH"), "KB_PATH")):
        if candidate:
            if not os.path.isdir(os.path.join(candidate, "entries")):
                raise KBError(f"{candidate}: not a KB directory ({how}): it has no entries/ folder")
            return os.path.abspath(candidate)
    try:
        here = os.getcwd()
    except OSError:  # the working directory was removed
        here = None
    while here:
        candidate = os.path.join(here, "kb")
        if os.path.isdir(os.path.join(candidate, "entries")):
            return candidate
        parent = os.path.dirname(here)
        here = parent if parent != here else None
    package = PACKAGE_DIR
    for candidate in (os.path.join(os.path.dirname(package), "kb"), os.path.join(package, "_data", "kb")):
        if os.path.isdir(os.path.join(candidate, "entries")):
            return candidate
    raise KBError("no knowledge base found: pass --kb DIR or set KB_PATH")


def bundled_kb(path: str) -> bool:
    """Whether `path` lies inside the data bundled with an installed package (never written)."""
    data = os.path.realpath(os.path.join(PACKAGE_DIR, "_data"))
    real = os.path.realpath(path)
    return real == data or real.startswith(data + os.sep)


def evidence_dir(kb_root: str) -> str:
    """Cached sources live in <kb>/evidence if present, else beside the KB as ../evidence."""
    inside = os.path.join(kb_root, "evidence")
    return inside if os.path.isdir(inside) else os.path.join(os.path.dirname(kb_root), "evidence")


YAML_FILES, EVIDENCE_FILES = (".yaml", ".yml"), (".md", ".txt")


def kb_folders(root: str) -> tuple:
    """(folder, suffixes) of every file set the loader reads; the cache signature covers the same."""
    return ((os.path.join(root, "entries"), YAML_FILES), (os.path.join(root, "quotes"), YAML_FILES),
            (evidence_dir(root), EVIDENCE_FILES))


def scan_files(top: str, suffixes: tuple, skipped: list | None = None) -> list:
    """Paths of the files under `top` with one of `suffixes`, sorted, hidden ones skipped."""
    return [entry.path for entry in _scan(top, suffixes, skipped=skipped)]


def _scan(top: str, suffixes: tuple, found: list | None = None, skipped: list | None = None,
          seen: list | None = None) -> list:
    """os.DirEntry objects, depth first in name order (scandir: no Python-level path joins).

    Only regular files (or links to them) are returned and only real folders are
    entered: a symlinked folder (a loop, a link to /) is not followed, and a FIFO or
    device is never opened. What is passed over, and folders that cannot be read,
    go to `skipped` as (path, reason) when a list is given. `seen`, when given, gets
    entry_key of every entry that is not hidden, whatever its type or name: the
    signature, so that a link, FIFO or folder coming or going is a change too.
    """
    found = [] if found is None else found
    try:
        with os.scandir(top) as it:
            entries = sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return found
    except OSError as exc:
        if skipped is not None:
            skipped.append((top, f"cannot read the folder: {exc.strerror or exc}"))
        if seen is not None:
            seen.append((top, "unreadable", exc.errno))
        return found
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if seen is not None:
            seen.append(entry_key(entry, suffixes))
        try:
            is_dir = entry.is_dir()
            if is_dir and entry.is_symlink():
                if skipped is not None:
                    skipped.append((entry.path, "a symlinked folder is not followed (move the files in)"))
                continue
            if is_dir:
                _scan(entry.path, suffixes, found, skipped, seen)
            elif entry.name.endswith(suffixes):
                if entry.is_file():
                    found.append(entry)
                elif skipped is not None:
                    skipped.append((entry.path, "cannot read: not a regular file (a dangling link, a link loop, "
                                                "a FIFO or a device)"))
        except OSError as exc:
            if skipped is not None:
                skipped.append((entry.path, f"cannot read: {exc.strerror or exc}"))
    return found


def stat_key(path_or_entry) -> tuple:
    """What changes when a file is written (a write always moves ctime); (path, None) if missing."""
    path = getattr(path_or_entry, "path", path_or_entry)
    try:
        st = path_or_entry.stat() if hasattr(path_or_entry, "stat") else os.stat(path)
    except OSError:  # missing, or a dangling link: the parse reports it as unreadable
        return (path, None)
    return (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def entry_key(entry, suffixes: tuple) -> tuple:
    """One directory entry in the signature: its path and type, a link's target, and for a file
    the loader reads, stat_key. Types from the folder listing (no stat for them) and never an
    open: a FIFO stays unopened."""
    key: tuple
    try:
        if entry.is_symlink():
            key = (entry.path, "link", os.readlink(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            return (entry.path, "dir")
        elif entry.is_file(follow_symlinks=False):
            key = (entry.path, "file")
        else:
            return (entry.path, "other")  # a FIFO, a socket, a device
    except OSError as exc:
        return (entry.path, "unreadable", exc.errno)
    return key + stat_key(entry)[1:] if entry.name.endswith(suffixes) else key


def code_stamp(*modules: str) -> tuple:
    """The size and mtime of package modules (paths under kb_tools/): changes when any is edited
    or replaced by an upgrade, so data cached by older code is never read as current."""
    out: list[tuple] = []
    for module in modules:
        try:
            st = os.stat(os.path.join(PACKAGE_DIR, module))
            out.append((module, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((module, None))
    return tuple(out)


def kb_signature(root: str) -> tuple:
    """Changes whenever anything in the KB's folders is added, removed, retyped or written: every
    entry counts (a dangling link or a FIFO the loader reports, a file it skips), not only the
    files it reads."""
    sig = [CACHE_FORMAT, code_stamp(*SCHEMA_MODULES), sys.version_info[:2], stat_key(os.path.join(root, SYNONYMS_FILE)),
           stat_key(os.path.join(root, TAGS_FILE))]
    for top, suffixes in kb_folders(root):
        sig.append(top)
        _scan(top, suffixes, seen=sig)
    return tuple(sig)
