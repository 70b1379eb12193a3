"""Build small KB directories on disk for tests: valid by default, broken on request."""
from __future__ import annotations

import textwrap

# A guard against a hang, never a speed check (speed is measured in bench/, as a ratio against a
# baseline run in the same invocation): a call that must stop on its own within a second or two is
# allowed this long before a test calls it hung, far beyond what load can stretch it to.
HANG_S = 60.0

import yaml

SNIPPET = textwrap.dedent("""\
    import torch
    torch.manual_seed(0)
    x = torch.randn(8, requires_grad=True)
    (x * 2).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 2.0))
    print("grad of 2x is", x.grad[0].item())
    """)


def cite(qid: str, supports: str = "It states the cause this entry describes.") -> dict:
    """One `evidence` item of an entry."""
    return {"quote": qid, "supports": supports}


def entry(eid: str, area: str = "loss", **overrides) -> dict:
    data = {
        "id": eid, "title": f"Title of {eid}", "area": area, "tags": ["demo"], "aliases": [],
        "symptoms": [f"{eid} symptom one", f"{eid} symptom two", f"{eid} symptom three"],
        "cause": "A cause.", "fix": "A fix.", "check": "A check.", "caveats": "None known.",
        "see_also": [], "evidence": [], "snippet_kind": "reproduces", "snippet": SNIPPET,
    }
    data.update(overrides)
    return data


def _literal(dumper, text):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(str, _literal)


def write_vocabulary(root, tags: dict | None = None):
    """kb/tags.yaml, the tag vocabulary (tag -> meaning); by default only the factory's `demo`."""
    path = root / "kb" / "tags.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"tags": tags or {"demo": "A tag for test entries."}}, sort_keys=False))
    return path


def write_entry(root, data: dict, area: str | None = None, raw: str | None = None):
    """An entry file; the KB gets the default vocabulary unless it already has one."""
    if not (root / "kb" / "tags.yaml").exists():
        write_vocabulary(root)
    area = area or (data.get("area") if isinstance(data, dict) else None) or "loss"
    stem = data["id"] if isinstance(data, dict) and "id" in data else "broken"
    path = root / "kb" / "entries" / area / f"{stem}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else yaml.dump(data, Dumper=_Dumper, sort_keys=False))
    return path


def write_source(root, sid: str, body: str = "line one\nline two\n", **meta):
    front = {"title": "A source", "author": "Someone", "kind": "primary", "url": "https://example.org/x",
             "published": "2020-01-01", "retrieved": "2026-11-22", "coverage": "full"}
    front.update(meta)
    path = root / "evidence" / f"{sid}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body)
    return path


def write_quotes(root, name: str, quotes: list):
    path = root / "kb" / "quotes" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"quotes": quotes}, sort_keys=False))
    return path


def make_kb(root, entries=None):
    """A valid KB with two entries, one source and one quote; returns the kb/ path."""
    write_source(root, "src")
    write_quotes(root, "src", [{"id": "q-one", "source": "src", "lines": [10, 10],
                                "text": "line one", "themes": ["demo"]}])
    for data in entries if entries is not None else [
            entry("alpha-bug", symptoms=["loss is flat from the first step", "weights never change",
                                         "the optimizer does nothing at all"], aliases=["A1"],
                  evidence=[cite("q-one")]),
            entry("beta-bug", area="numerics", symptoms=["loss becomes nan after a few hundred steps",
                                                         "gradient norm explodes to inf",
                                                         "training diverges with fp16"])]:
        write_entry(root, data)
    return root / "kb"


def shipped_entry_ids() -> list:
    """The shipped KB's entry ids, from its file names alone: tests parametrize over them at
    collection without parsing the KB (the parsed KB is the session fixture `shipped_kb`)."""
    import os
    top = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kb", "entries")
    return sorted(name[:-5] for area in sorted(os.listdir(top)) if os.path.isdir(os.path.join(top, area))
                  for name in os.listdir(os.path.join(top, area)) if name.endswith(".yaml"))



def rank_one_misbehaves_once(mark, misbehaviour: str, always: bool = False) -> str:
    """A two-rank torchrun snippet: rank 0 prints "work done"; rank 1 runs `misbehaviour` (indented
    code) on the first run only (the mark file does not exist yet), or on every run. The mark is
    written into the code, not passed in the environment: a run in another environment would start
    (and warm up) a fork server of its own."""
    body = textwrap.indent(textwrap.dedent(misbehaviour), "    ")
    return (f"import os\nimport sys\nimport time\nrank, mark = int(os.environ['RANK']), {str(mark)!r}\n"
            "if rank == 0:\n    print('work done', flush=True)\n"
            f"if rank == 1 and ({always!r} or not os.path.exists(mark)):\n    open(mark, 'w').close()\n{body}")
