"""`kb mcp`, driven by the MCP SDK's own client over a real stdio subprocess: each tool returns
what the matching `kb ... --json` prints, entries read as resources, and a bad call is a
one-line tool error after which the server still answers."""
from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("mcp")

from anyio.from_thread import start_blocking_portal  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from kb_tools import agents, cli  # noqa: E402
from kb_tools.load import load_kb  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KB_DIR = os.path.join(ROOT, "kb")
TOOLS = {"search", "show", "snippet", "verify_quote", "context", "lint"}


class Server:
    """A `kb mcp` subprocess and an initialized ClientSession, called from sync tests through
    an anyio portal (one event loop in a thread), so the module starts the server once."""

    def __init__(self, portal, session, errlog):
        self.portal, self.session, self.errlog = portal, session, errlog

    def __getattr__(self, name):  # server.call_tool(...) runs session.call_tool(...) on the loop
        method = getattr(self.session, name)
        return lambda *args, **kwargs: self.portal.call(lambda: method(*args, **kwargs))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = {k: os.environ[k] for k in ("KB_CACHE_DIR", "KB_NO_CACHE", "XDG_CACHE_HOME") if k in os.environ}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kb_tools", "--kb", KB_DIR, "mcp"],
                                   cwd=ROOT, env=env)
    errlog_path = tmp_path_factory.mktemp("mcp") / "stderr.txt"
    with open(errlog_path, "w+", encoding="utf-8") as errlog, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params, errlog=errlog)) as (read, write):
            with portal.wrap_async_context_manager(ClientSession(read, write)) as session:
                portal.call(session.initialize)
                yield Server(portal, session, errlog_path)


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
    assert content.text == agents.entry_markdown(kb.entries["double-softmax"])
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



def test_lint_finds_a_mistake_in_code_and_in_a_file(server, capsys, tmp_path):
    source = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.zero_grad()\n    opt.step()\n"
    (finding,) = call(server, "lint", code=source)["findings"]
    assert (finding["code"], finding["line"], finding["entry"]) == ("KBL005", 4, "optimizer-step-order")
    script = tmp_path / "train.py"
    script.write_text(source)
    capsys.readouterr()
    assert cli.main(["lint", str(script), "--json"]) == 1  # exit 1: something found
    assert call(server, "lint", path=str(script))["findings"] == json.loads(capsys.readouterr().out)
    for bad in ({}, {"code": "def (:"}, {"path": str(tmp_path / "missing.py")}):
        result = server.call_tool("lint", bad)
        assert result.is_error and "\n" not in result.content[0].text.strip()
