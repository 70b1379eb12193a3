"""`kb mcp`: the KB served over the Model Context Protocol on stdio, for editors and agents that
call tools rather than shell commands. The tools return the same JSON shapes as the CLI's `--json`
(from agents.py), so an agent sees one format whichever way it reaches the KB; the server is built on
the official `mcp` SDK's 2.x API (`MCPServer`), which only `kb mcp` imports."""
import functools
import inspect
import os
import sys
import warnings
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPDeprecationWarning, NoBackChannelError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from kb_tools import __version__
from kb_tools.render.agents import MAX_QUOTE_CHARS
from kb_tools.confined import confined_files, lint_in_child, root_folders
from kb_tools.search.rank import MAX_REPORT_CHARS
from kb_tools.core.util import KBError

INSTRUCTIONS = (
    "A source-checked knowledge base of known causes of PyTorch training that runs but does not learn. "
    "Start with `search` (or `context` for ready-to-read Markdown) using the user's words or the pasted "
    "error; then `show` an entry, run its check, and use `snippet` for a program that reproduces the bug "
    "and the fix. Entries are also resources: kb://entries/{id}."
)

# The longest string each parameter takes, so that no call costs more than its use: a query as long as
# `kb search` takes, a quote several times the longest the KB holds (see agents.MAX_QUOTE_CHARS), ids,
# areas and dotted paths of a line, a path as long as the system's, and a script's text up to 1 MB
# (analysed in a child process with a time limit: see confined.py).
MAX_QUERY, MAX_QUOTE, MAX_NAME, MAX_PATH, MAX_CODE = MAX_REPORT_CHARS, MAX_QUOTE_CHARS, 200, 4_096, 1_000_000
ROOTS_TIMEOUT = 10  # seconds the client has to list its roots

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


class _Server(MCPServer):
    """MCPServer whose argument-validation errors are one line, like every other tool error."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"`{'.'.join(str(p) for p in err['loc']) or 'arguments'}`: {err['msg']}"
                                 for err in cause.errors())
            raise ToolError(f"Error executing tool {name}: bad arguments: {problems}") from cause


def build_server(kb_root: str | None) -> MCPServer:
    """The server over the KB at `kb_root` (see locate.find_kb_root); the KB and its search
    index are loaded here, once, and every call reads them."""
    from kb_tools.render.agents import context as kb_context
    from kb_tools.render.agents import snippet_json, verify_text
    from kb_tools.render.markdown import entry_markdown
    from kb_tools.render.sections import entry_json
    from kb_tools.core.load import load_kb
    from kb_tools.core.model import AREAS
    from kb_tools.search.index import dense_unavailable, load_index
    from kb_tools.lint import lint_text
    from kb_tools.search.answer import answer as kb_answer
    from kb_tools.core.util import did_you_mean

    kb = load_kb(kb_root)
    index = load_index(kb_root)
    why = dense_unavailable(index)  # also loads the embedder now, not in the first call
    if why:
        print(f"kb: lexical ranking only: {why}", file=sys.stderr)  # stdout carries the protocol
    server = _Server(name="kb", title="kb: debugging PyTorch training", version=__version__,
                     instructions=INSTRUCTIONS, log_level="WARNING")
    # what `lint` may read when the client declares no roots: the working directory's tree (never the
    # whole file system, where a host starts the server in /) and the KB
    here = os.path.realpath(os.getcwd())
    fallback = [root for root in dict.fromkeys((here, os.path.realpath(kb.root))) if root != os.path.dirname(root)]
    fallback = [root for root in fallback if not any(root.startswith(other + os.sep) for other in fallback)]

    def guarded(fn):
        """A KBError (the library's one-line user error) becomes the tool's error message."""
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def call_async(*args, **kwargs):
                try:
                    return await fn(*args, **kwargs)
                except KBError as exc:
                    raise ToolError(str(exc)) from None
            return call_async

        @functools.wraps(fn)  # the SDK reads the parameters through __wrapped__
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except KBError as exc:
                raise ToolError(str(exc)) from None
        return call

    async def allowed_roots(ctx) -> tuple:
        """(folders, whose): the client's file roots when it declares any (asked at each call, as they
        may change), else the working directory and the KB."""
        capabilities = ctx.client_capabilities if ctx is not None else None
        if capabilities is not None and capabilities.roots is not None:
            try:
                with warnings.catch_warnings():  # deprecated from protocol 2026-07-28, still what hosts send
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    pending = ctx.session.list_roots()
                with anyio.fail_after(ROOTS_TIMEOUT):
                    listed = await pending
            except NoBackChannelError:  # a transport without server-to-client requests
                listed = None
            except TimeoutError:
                raise KBError(f"the client declares roots but did not list them within {ROOTS_TIMEOUT} s") from None
            except Exception as exc:  # noqa: BLE001 - the client's error, reported in one line
                raise KBError(f"the client declares roots but listing them failed: {exc}") from None
            roots = root_folders(root.uri for root in listed.roots) if listed is not None else []
            if roots:
                return roots, "the roots the client declares"
        return fallback, "the client declares no roots: the server's working directory and the KB"

    def tool(description: str):
        def register(fn):
            server.add_tool(guarded(fn), name=fn.__name__, description=description, annotations=READ_ONLY)
            return fn
        return register

    def check_area(area):
        if area is not None and area not in AREAS:
            raise KBError(f"unknown area '{area}'{did_you_mean(area, list(AREAS))}; one of: {', '.join(AREAS)}")

    @tool("Rank KB entries for a symptom (a few words, a pasted error, a paragraph, or a whole report with "
          "code, traceback and log lines, which are read by kb lint, the KB's error messages and a log reader); "
          "returns hits best first: id, title, area, score, matched symptom, low_confidence, and when it applies "
          "tell_apart (the one check that separates close leaders), evidence (what the report showed), "
          "out_of_scope (what the KB covers).")
    def search(query: Annotated[str, Field(description="what the run shows, e.g. 'loss flat after warmup'",
                                           max_length=MAX_QUERY)],
               limit: Annotated[int, Field(description="at most this many hits")] = 5,
               area: Annotated[str | None, Field(description=f"only this area: {', '.join(AREAS)}",
                                                 max_length=MAX_NAME)] = None,
               ) -> list[dict[str, Any]]:
        if limit < 1:
            raise KBError("limit must be at least 1")
        check_area(area)
        return kb_answer(index, query, limit=limit, area=area, lint_source=lint_text).to_json()

    @tool("One entry in full by id or alias (symptoms, cause, fix, check, evidence, see_also, snippet).")
    def show(id: Annotated[str, Field(description="entry id or alias, e.g. double-softmax or O12",
                                      max_length=MAX_NAME)],
             ) -> dict[str, Any]:
        return entry_json(kb.entry_named(id))

    @tool("An entry's self-contained program that reproduces the bug, applies the fix and asserts both, "
          "with the command to run it.")
    def snippet(id: Annotated[str, Field(description="entry id or alias", max_length=MAX_NAME)]) -> dict[str, Any]:
        return snippet_json(kb.entry_named(id))

    @tool("Check that `text` is verbatim in the cached source `source`, a source id (at `lines` if given), "
          "or, for a source that documents a package (the torch-* ids), in the installed package's "
          "docstring of `object`; ok, or the defect found.")
    def verify_quote(text: Annotated[str, Field(description="the words to check ([...] marks an elision)",
                                                max_length=MAX_QUOTE)],
                     source: Annotated[str, Field(description="source id: a file stem under evidence/, e.g. "
                                                              "karpathy-recipe-2019 or torch-crossentropyloss "
                                                              "(a package name such as torch is not one)",
                                                  max_length=MAX_NAME)],
                     lines: Annotated[list[int] | None, Field(description="[first, last] cited lines")] = None,
                     object: Annotated[str | None, Field(description="dotted path of the object whose docstring "
                                                                     "holds the text, e.g. torch.nn.CrossEntropyLoss",
                                                         max_length=MAX_NAME)] = None,
                     ) -> dict[str, Any]:
        return verify_text(kb, text, source, lines=lines, object_path=object)

    @tool("The best entries for a symptom as compact Markdown (cause, fix, check) within a token budget, "
          "most relevant first; paste `markdown` into your context.")
    def context(query: Annotated[str, Field(description="what the run shows", max_length=MAX_QUERY)],
                budget: Annotated[int, Field(description="at most this many tokens (4 characters each)")] = 1500,
                ) -> dict[str, Any]:
        if budget < 100:
            raise KBError("budget must be at least 100 tokens")
        return kb_context(kb_root, query, budget=budget, index=index, kb=kb)

    @tool("Find the KB's mistakes in a training script (softmax before CrossEntropyLoss, zero_grad between "
          "backward and step, eval() left on, ...): pass the code, or a path inside the client's roots (the "
          "server's working directory when it declares none); findings with line, rule code, message and "
          "the entry to read, and the files skipped under a folder.")
    async def lint(code: Annotated[str | None, Field(description="the script's source text",
                                                     max_length=MAX_CODE)] = None,
                   path: Annotated[str | None, Field(description="a .py file or a folder inside the client's roots",
                                                     min_length=1, max_length=MAX_PATH)] = None,
                   ctx: Context | None = None,
                   ) -> dict[str, Any]:
        if (code is None) == (path is None):
            raise KBError("give exactly one of `code` (the script's text) or `path`")
        if code is not None:
            jobs, skipped = [{"path": "<code>", "code": code}], []
        else:
            roots, whose = await allowed_roots(ctx)
            assert path is not None  # exactly one of code and path
            files, skipped = await anyio.to_thread.run_sync(confined_files, path, roots, whose)
            jobs = [{"path": shown, "file": real} for shown, real in files]
        findings = await anyio.to_thread.run_sync(lint_in_child, jobs) if jobs else []
        return {"findings": findings, "skipped": skipped}

    for entry_id, one in kb.entries.items():  # each entry listed; the template below also reads aliases
        symptom = " ".join(one.symptoms[0].split()) if one.symptoms else one.title
        server.add_resource(FunctionResource(
            uri=f"kb://entries/{entry_id}", name=entry_id, title=one.title,
            description=f"{one.title} ({one.area}). Seen as: {symptom}", mime_type="text/markdown",
            fn=functools.partial(entry_markdown, one)))

    @server.resource("kb://entries/{id}", name="entry", title="KB entry",
                     description="One entry as plain Markdown: symptoms, cause, fix, check, snippet.",
                     mime_type="text/markdown")
    def entry(id: str) -> str:
        try:
            return entry_markdown(kb.entry_named(id))
        except KBError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    return server


def serve(kb_root: str | None) -> None:
    """Serve the KB over stdin/stdout until the client disconnects."""
    build_server(kb_root).run("stdio")
