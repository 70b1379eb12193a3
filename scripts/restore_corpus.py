"""Restore the third-party scripts of a real-script corpus from local clones, byte for byte.

    python scripts/restore_corpus.py {watch,lint} CLONES [--check]

`watch` is tests/watch/real/ (healthy scripts run under kb watch), `lint` is tests/lint/real/
(scripts read by kb lint).

CLONES is a folder holding one git clone (or bare mirror) per repository of MANIFEST.yaml, named
`owner+name`, `owner__name` or `owner/name` (the first found wins; a bare mirror may also sit
in a `repo` folder inside it). Each item's file, the modules restored beside it (`support`) and
its repository's licence file are read with `git show <commit>:<path>` and written under
the corpus folder; each file's sha256 (and the script's line count) must match MANIFEST, or the
file is not written. With --check nothing is written: the files already there are verified.
Exit status 0 when every item is present and matches, 1 otherwise.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPORA = {"watch": os.path.join(ROOT, "tests", "watch", "real"), "lint": os.path.join(ROOT, "tests", "lint", "real")}


def _clone(clones: str, repo: str) -> str | None:
    owner, name = repo.split("/")
    for folder in (f"{owner}+{name}", f"{owner}__{name}", os.path.join(owner, name)):
        for path in (os.path.join(clones, folder, "repo"), os.path.join(clones, folder)):
            if os.path.isdir(path) and subprocess.run(["git", "-C", path, "rev-parse", "--git-dir"],
                                                      capture_output=True).returncode == 0:
                return path
    return None


def _show(clone: str, commit: str, path: str) -> bytes | None:
    done = subprocess.run(["git", "-C", clone, "show", f"{commit}:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _files(item: dict):
    """(file under the corpus folder, path in the repository, sha256 or None, lines or None)."""
    yield item["file"], item["path"], item["sha256"], item["lines"]
    for extra in item.get("support", []):
        yield extra["file"], extra["path"], extra["sha256"], None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("corpus", choices=sorted(CORPORA), help="which corpus: tests/watch/real or tests/lint/real")
    parser.add_argument("clones", nargs="?", help="folder of clones named owner+name (not needed with --check)")
    parser.add_argument("--check", action="store_true", help="only verify the files already restored")
    args = parser.parse_args(argv)
    real = CORPORA[args.corpus]
    if not args.check and not args.clones:
        parser.error("name the folder of clones, or use --check")
    with open(os.path.join(real, "MANIFEST.yaml")) as fh:
        items = yaml.safe_load(fh)
    bad = 0
    for item in items:
        clone = None if args.check else _clone(args.clones, item["repo"])
        if not args.check and clone is None:
            print(f"missing clone: {item['repo']} ({item['file']})")
            bad += 1
            continue
        for file, path, sha, lines in _files(item):
            target = os.path.join(real, file)
            if args.check:
                data = open(target, "rb").read() if os.path.exists(target) else None
            else:
                data = _show(clone, item["commit"], path)
            if data is None:
                print(f"missing: {file} ({item['repo']}@{item['commit'][:12]}:{path})")
                bad += 1
                continue
            if hashlib.sha256(data).hexdigest() != sha or (lines is not None and _lines(data) != lines):
                print(f"mismatch: {file} (sha256 or line count differs from MANIFEST)")
                bad += 1
                continue
            if not args.check:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as fh:
                    fh.write(data)
        if not args.check:
            licence = _show(clone, item["commit"], item["licence_file"])
            if licence is not None:
                os.makedirs(os.path.join(real, "LICENSES"), exist_ok=True)
                with open(os.path.join(real, "LICENSES", item["repo"].replace("/", "__") + ".txt"), "wb") as fh:
                    fh.write(licence)
    print(f"{len(items)} items, {bad} problem(s)" if bad else f"{len(items)} items restored and verified")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
