"""`kb mcp`, driven by the MCP SDK's own client over a real stdio subprocess: each tool returns
what the matching `kb ... --json` prints, entries read as resources, and a bad call is a
one-line tool error after which the server still answers. `lint` reads only inside the roots
the client declares (else the server's working directory and the KB), never waits on a FIFO,
and every string argument has a length limit."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
import mcp_types  # noqa: E402
from anyio.from_thread import start_blocking_portal  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from kb_tools.render import markdown as render_markdown
from kb_tools import cli  # noqa: E402
from kb_tools import confined  # noqa: E402
from kbfactory import HANG_S  # noqa: E402
from kb_tools.render import agents
from kb_tools.core.load import load_kb  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KB_DIR = os.path.join(ROOT, "kb")
TOOLS = {"search", "show", "snippet", "verify_quote", "context", "lint"}


MISTAKE = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.zero_grad()\n    opt.step()\n"


class Server:
    """A `kb mcp` subprocess and an initialized ClientSession, called from sync tests through
    an anyio portal (one event loop in a thread), so the module starts the server once."""

    def __init__(self, portal, session, errlog):
        self.portal, self.session, self.errlog = portal, session, errlog

    def __getattr__(self, name):  # server.call_tool(...) runs session.call_tool(...) on the loop
        method = getattr(self.session, name)
        return lambda *args, **kwargs: self.portal.call(lambda: method(*args, **kwargs))

    def call_tool_within(self, seconds, name, arguments):
        """call_tool, or TimeoutError when no answer comes within `seconds` (a call that blocks)."""
        async def bounded():
            with anyio.fail_after(seconds):
                return await self.session.call_tool(name, arguments)
        return self.portal.call(bounded)


@contextlib.contextmanager
def kb_mcp(cwd, errlog_path, roots=None):
    """A Server started in `cwd`; with `roots` (a list the test may change), the client declares the
    roots capability and answers roots/list with those folders at each request."""
    env = {k: os.environ[k] for k in ("KB_CACHE_DIR", "KB_NO_CACHE", "XDG_CACHE_HOME") if k in os.environ}
    env["PYTHONPATH"] = ROOT  # the server runs outside the checkout
    params = StdioServerParameters(command=sys.executable, args=["-m", "kb_tools", "--kb", KB_DIR, "mcp"],
                                   cwd=str(cwd), env=env)

    async def list_roots(context):
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=folder.as_uri()) for folder in roots])

    with open(errlog_path, "w+", encoding="utf-8") as errlog, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params, errlog=errlog)) as (read, write):
            session = ClientSession(read, write, list_roots_callback=list_roots if roots is not None else None)
            with portal.wrap_async_context_manager(session):
                portal.call(session.initialize)
                yield Server(portal, session, errlog_path)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The server's working directory: what `lint` may read when the client declares no roots."""
    return tmp_path_factory.mktemp("workspace")


@pytest.fixture(scope="module")
def server(tmp_path_factory, workspace):
    with kb_mcp(workspace, tmp_path_factory.mktemp("mcp") / "stderr.txt") as running:
        yield running


@pytest.fixture(scope="module")
def declared():
    """The roots the client of `rooted_server` declares; a test may change them between calls."""
    return []


@pytest.fixture(scope="module")
def rooted_server(tmp_path_factory, declared):
    with kb_mcp(ROOT, tmp_path_factory.mktemp("mcp") / "stderr.txt", roots=declared) as running:
        yield running


@pytest.fixture(scope="module")
def kb():
    return load_kb(KB_DIR)


def cli_json(capsys, *argv):
    capsys.readouterr()
    assert cli.main(["--kb", KB_DIR, *argv]) == 0
    return json.loads(capsys.readouterr().out)


def call(server, name, **arguments):
    """The structured result of a successful tool call."""
    result = server.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_lists_exactly_the_tools_each_with_a_schema_and_a_description(server):
    tools = server.list_tools().tools
    assert {t.name for t in tools} == TOOLS and len(tools) == len(TOOLS)
    for tool in tools:
        assert tool.input_schema["type"] == "object" and tool.input_schema["properties"]
        assert tool.output_schema is not None  # structured results
        assert tool.description and "\n" not in tool.description
        assert tool.annotations.read_only_hint
    by_name = {t.name: t for t in tools}
    assert by_name["search"].input_schema["required"] == ["query"]
    assert set(by_name["search"].input_schema["properties"]) == {"query", "limit", "area"}
    assert set(by_name["verify_quote"].input_schema["properties"]) == {"text", "source", "lines", "object"}
    assert set(by_name["context"].input_schema["properties"]) == {"query", "budget"}
    assert set(by_name["lint"].input_schema["properties"]) == {"code", "path"}  # not the injected context


@pytest.mark.parametrize("query", ["loss flat", "RuntimeError: element 0 of tensors does not require grad"])
def test_search_is_what_kb_search_json_prints(server, capsys, query):
    assert call(server, "search", query=query)["result"] == cli_json(capsys, "search", query, "--json", "-n", "5")
    assert (call(server, "search", query=query, limit=2, area="loss")["result"]
            == cli_json(capsys, "search", query, "--json", "-n", "2", "--area", "loss"))


def test_show_and_snippet_are_what_the_cli_gives(server, capsys, kb):
    assert call(server, "show", id="double-softmax") == cli_json(capsys, "show", "double-softmax", "--json")
    assert call(server, "show", id="O12") == call(server, "show", id="double-softmax")  # an alias resolves
    snippet = call(server, "snippet", id="O12")
    assert snippet == agents.snippet_json(kb.entries["double-softmax"])
    capsys.readouterr()
    assert cli.main(["--kb", KB_DIR, "snippet", "double-softmax"]) == 0
    assert capsys.readouterr().out.strip() == snippet["snippet"].strip()


def test_verify_quote_accepts_a_real_quote_and_names_a_changed_word(server, kb):
    quote = next(q for q in kb.quotes.values() if q.lines and not q.object)
    ok = call(server, "verify_quote", text=quote.text, source=quote.source, lines=quote.lines)
    assert ok == agents.verify_text(kb, quote.text, quote.source, lines=quote.lines)
    assert ok["ok"] and ok["defect"] is None
    words = quote.text.split()
    words[len(words) // 2] = "zebra"
    bad = call(server, "verify_quote", text=" ".join(words), source=quote.source)
    assert not bad["ok"] and bad["defect"]["code"] and bad["defect"]["kind"] in ("words-changed", "not-found")
    missing = call(server, "verify_quote", text="anything", source="no-such-source")
    assert not missing["ok"] and missing["defect"]["kind"] == "unknown-source"


def test_context_is_what_kb_context_json_prints(server, capsys):
    assert call(server, "context", query="loss flat") == cli_json(capsys, "context", "loss flat", "--json")
    tight = call(server, "context", query="loss flat", budget=200)
    assert tight == cli_json(capsys, "context", "loss flat", "--budget", "200", "--json")
    assert tight["tokens"] <= 200


def test_every_entry_is_a_markdown_resource(server, kb):
    (template,) = server.list_resource_templates().resource_templates
    assert template.uri_template == "kb://entries/{id}" and template.mime_type == "text/markdown"
    (content,) = server.read_resource("kb://entries/double-softmax").contents
    assert content.mime_type == "text/markdown"
    assert content.text == render_markdown.entry_markdown(kb.entries["double-softmax"])
    assert content.text.startswith("## double-softmax: ")


def test_an_unknown_resource_is_an_error_and_the_server_goes_on(server):
    with pytest.raises(MCPError, match="unknown entry 'double-softmx' \\(did you mean 'double-softmax'\\?\\)"):
        server.read_resource("kb://entries/double-softmx")
    assert server.read_resource("kb://entries/O12").contents[0].text.startswith("## double-softmax: ")


@pytest.mark.parametrize("name, arguments, message", [
    ("show", {"id": "double-softmx"}, "unknown entry 'double-softmx' (did you mean 'double-softmax'?)"),
    ("snippet", {"id": "nope"}, "unknown entry 'nope'"),
    ("search", {"query": "   "}, "empty query"),
    ("search", {"query": "loss", "limit": 0}, "limit must be at least 1"),
    ("search", {"query": "loss", "area": "lossy"}, "unknown area 'lossy' (did you mean 'loss'?)"),
    ("search", {"query": "loss", "limit": "many"}, "`limit`: Input should be a valid integer"),
    ("show", {"id": 12}, "`id`: Input should be a valid string"),
    ("show", {}, "`id`: Field required"),
    ("context", {"query": "loss", "budget": 10}, "budget must be at least 100 tokens"),
    ("verify_quote", {"text": " ", "source": "x"}, "`text` must be the words to check"),
    ("verify_quote", {"text": "a", "source": "x", "lines": [3]}, "`lines` must be [first, last]"),
    ("no_such_tool", {}, "no_such_tool"),
])
def test_a_bad_call_is_a_one_line_tool_error_and_the_session_goes_on(server, name, arguments, message):
    result = server.call_tool(name, arguments)
    assert result.is_error
    (content,) = result.content
    assert message in content.text and "\n" not in content.text and "Traceback" not in content.text
    assert call(server, "search", query="loss flat", limit=1)["result"][0]["id"]


def test_the_server_logged_no_traceback(server):
    server.send_ping()
    assert "Traceback" not in server.errlog.read_text(encoding="utf-8")


def test_lint_finds_a_mistake_in_code_and_in_a_file(server, capsys, workspace):
    (finding,) = call(server, "lint", code=MISTAKE)["findings"]
    assert (finding["code"], finding["line"], finding["entry"]) == ("KBL005", 4, "optimizer-step-order")
    script = workspace / "train.py"
    script.write_text(MISTAKE)
    capsys.readouterr()
    assert cli.main(["lint", str(script), "--json"]) == 1  # exit 1: something found
    assert call(server, "lint", path=str(script)) == {"findings": json.loads(capsys.readouterr().out),
                                                      "skipped": []}
    assert call(server, "lint", path="train.py")["findings"][0]["path"] == "train.py"  # from the server's cwd
    for bad in ({}, {"code": "def (:"}, {"path": str(workspace / "missing.py")}, {"path": ""}):
        result = server.call_tool("lint", bad)
        assert result.is_error and "\n" not in result.content[0].text.strip()


def error_of(result) -> str:
    """The one line of a failed tool call."""
    assert result.is_error
    (content,) = result.content
    assert "\n" not in content.text and "Traceback" not in content.text
    return content.text


def test_lint_refuses_a_path_outside_the_roots_and_names_them(server, workspace, tmp_path):
    shadow = tmp_path / "shadow"  # as /etc/shadow: a file the server's user can read, outside the roots
    shadow.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    outside = tmp_path / "train.py"
    outside.write_text(MISTAKE)
    for path in (shadow, outside, tmp_path, tmp_path / ".." / workspace.name / ".." / tmp_path.name):
        message = error_of(server.call_tool("lint", {"path": str(path)}))
        assert f"{path}: outside the folders this server may read: " in message
        assert str(workspace.resolve()) in message and str(os.path.realpath(KB_DIR)) in message
        assert "secret-hash" not in message
    assert call(server, "lint", code=MISTAKE)["findings"]  # and the server goes on


def test_lint_refuses_a_symlink_that_leaves_the_root_and_skips_one_under_a_folder(server, workspace, tmp_path):
    target = tmp_path / "elsewhere.py"
    target.write_text(MISTAKE)
    link = workspace / "escape.py"
    link.symlink_to(target)
    message = error_of(server.call_tool("lint", {"path": str(link)}))
    assert f"{link}: outside the folders this server may read" in message
    project = workspace / "project"
    project.mkdir()
    (project / "train.py").write_text(MISTAKE)
    (project / "linked.py").symlink_to(target)
    (project / "etc.py").symlink_to("/etc/passwd")
    result = call(server, "lint", path=str(project))
    assert [f["path"] for f in result["findings"]] == [str(project / "train.py")]
    assert result["skipped"] == [{"path": str(project / "etc.py"), "reason": "outside the allowed roots"},
                                 {"path": str(project / "linked.py"), "reason": "outside the allowed roots"}]


def test_lint_refuses_a_fifo_without_waiting_on_it(server, workspace):
    fifo = workspace / "pipe.py"
    os.mkfifo(fifo)
    folder = workspace / "with_fifo"
    folder.mkdir()
    os.mkfifo(folder / "stream.py")
    (folder / "train.py").write_text(MISTAKE)
    try:
        message = error_of(server.call_tool_within(20, "lint", {"path": str(fifo)}))
        assert message.endswith(f"{fifo}: not a regular file (a FIFO)")
        result = server.call_tool_within(20, "lint", {"path": str(folder)})
        assert not result.is_error
        assert [f["path"] for f in result.structured_content["findings"]] == [str(folder / "train.py")]
        assert result.structured_content["skipped"] == [{"path": str(folder / "stream.py"),
                                                         "reason": "not a regular file (a FIFO)"}]
    finally:  # a server that opened a FIFO waits for a writer: be one, so that it can end
        for path in (fifo, folder / "stream.py"):
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_lint_reads_inside_the_roots_the_client_declares_and_nowhere_else(rooted_server, declared, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "train.py").write_text(MISTAKE)
    declared[:] = [first]
    (finding,) = call(rooted_server, "lint", path=str(first / "train.py"))["findings"]
    assert finding["code"] == "KBL005"
    assert call(rooted_server, "lint", path=str(first))["findings"] == [finding]
    for path in (second / "train.py", os.path.join(ROOT, "kb_tools", "lint", "engine.py")):  # nor the server's cwd
        message = error_of(rooted_server.call_tool("lint", {"path": str(path)}))
        assert message.endswith(f"{path}: outside the folders this server may read: {first.resolve()} "
                                f"(the roots the client declares)")
    declared[:] = [second]  # roots are asked for at each call
    assert call(rooted_server, "lint", path=str(second / "train.py"))["findings"]
    assert "outside the folders" in error_of(rooted_server.call_tool("lint", {"path": str(first / "train.py")}))
    declared[:] = []  # a client that declares no roots gets the server's working directory and the KB
    assert "outside the folders" in error_of(rooted_server.call_tool("lint", {"path": str(second / "train.py")}))
    assert call(rooted_server, "lint", path=os.path.join(ROOT, "kb_tools", "lint", "engine.py"))["skipped"] == []


# every string parameter, its limit, and the other arguments of a call that would otherwise work
LIMITS = [("search", "query", 100_000, {}), ("search", "area", 200, {"query": "loss flat"}),
          ("show", "id", 200, {}), ("snippet", "id", 200, {}),
          ("verify_quote", "text", 4_000, {"source": "karpathy-recipe-2019"}),
          ("verify_quote", "source", 200, {"text": "loss"}),
          ("verify_quote", "object", 200, {"text": "loss", "source": "torch-crossentropyloss"}),
          ("context", "query", 100_000, {}), ("lint", "code", 1_000_000, {}), ("lint", "path", 4_096, {})]


def test_every_string_parameter_has_a_limit(server):
    tools = {t.name: t.input_schema["properties"] for t in server.list_tools().tools}
    strings = {(name, param) for name, props in tools.items() for param, schema in props.items()
               if "string" in json.dumps(schema)}
    assert strings == {(name, param) for name, param, _, _ in LIMITS}
    for name, param, limit, _ in LIMITS:
        schema = tools[name][param]
        assert limit in [schema.get("maxLength")] + [s.get("maxLength") for s in schema.get("anyOf", [])]


@pytest.mark.parametrize("name, param, limit, others", LIMITS, ids=[f"{n}-{p}" for n, p, _, _ in LIMITS])
def test_an_oversized_argument_is_a_one_line_error(server, name, param, limit, others):
    started = time.monotonic()
    message = error_of(server.call_tool(name, {**others, param: "a" * (limit + 1)}))
    assert f"`{param}`: String should have at most {limit} characters" in message
    assert time.monotonic() - started < HANG_S  # refused before any work: bench/mcp_limits.py times it


def test_verify_quote_on_a_longest_text_answers_in_a_moment(server, kb):
    source = max(kb.sources.values(), key=lambda s: os.path.getsize(s.path))  # the largest cached file
    text = " ... ".join(["the"] * 1000)[:4_000]  # today's slowest shape: many elided common words
    started = time.monotonic()
    message = error_of(server.call_tool("verify_quote", {"text": text, "source": source.id}))
    assert "more than 20 parts" in message
    words = open(source.path, encoding="utf-8").read().split()
    text = " ".join(words[len(words) // 2:])[:4_000].rsplit(" ", 1)[0]  # a long run of the source's words
    result = call(server, "verify_quote", text=text, source=source.id)
    assert result["defect"] is None or result["defect"]["kind"] in ("words-changed", "not-found", "truncated")
    assert time.monotonic() - started < HANG_S  # a 1 MB text took 28 s of CPU before the limits; bench/mcp_limits.py


def test_verify_quote_says_a_package_is_not_a_source(server):
    tool = next(t for t in server.list_tools().tools if t.name == "verify_quote")
    described = tool.input_schema["properties"]["source"]["description"]
    assert "or an installed package" not in described and "is not one" in described
    message = error_of(server.call_tool("verify_quote", {"text": "the input is expected to contain the "
                                                                 "unnormalized logits", "source": "torch",
                                                         "object": "torch.nn.CrossEntropyLoss"}))
    assert "'torch' is a package, not a source id" in message and "torch-" in message


def test_lint_gives_up_on_code_that_takes_too_long(tmp_path):
    slow = "for x in y: z.backward()\n" * 40_000  # the rules are quadratic in the loops of a scope
    started = time.monotonic()
    with pytest.raises(confined.KBError, match="lint stopped after 1 s"):
        confined.lint_in_child([{"path": "<code>", "code": slow}], seconds=1)
    assert time.monotonic() - started < HANG_S


def test_each_entry_is_listed_as_a_resource(server, kb):
    resources = server.list_resources().resources
    assert sorted(r.uri for r in resources) == sorted(f"kb://entries/{i}" for i in kb.entries)
    for resource in resources:
        entry = kb.entries[resource.name]
        assert str(resource.uri) == f"kb://entries/{entry.id}" and resource.title == entry.title
        assert resource.mime_type == "text/markdown" and resource.description.startswith(entry.title)
    listed = next(r for r in resources if r.name == "double-softmax")
    (content,) = server.read_resource(listed.uri).contents
    assert content.mime_type == "text/markdown"
    assert content.text == render_markdown.entry_markdown(kb.entries["double-softmax"])
