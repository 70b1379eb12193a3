"""`kb mcp`: the KB served to MCP clients over stdio (kb_tools/mcp_server.py; needs the mcp SDK)."""
from __future__ import annotations

import sys

from kb_tools.commands.common import load_kb_checked
from kb_tools.commands.output import EXIT_OK
from kb_tools.core.util import KBError



# `kb mcp`'s one dependency, installed into the interpreter that runs kb (kb-tools is not on PyPI,
# so `pip install 'kb-tools[mcp]'` finds nothing; the extra works only from a checkout, as '.[mcp]')
MCP_INSTALL = (f'"{sys.executable}"' if " " in sys.executable else sys.executable) + " -m pip install 'mcp>=2.3,<3'"
NAME = "mcp"
SUMMARY = "serve the KB to MCP clients (editors, agents) over stdio"
DESCRIPTION = (
    "A Model Context Protocol server on stdin/stdout: tools that answer as the matching commands' --json "
    "(search, show, context, lint; their list is in README), and every entry as the resource "
    "kb://entries/ID. Needs the mcp package in the Python that runs kb: python -m pip install "
    "'mcp>=2.3,<3' (without it, kb mcp prints the command for its interpreter).")


def run(args) -> int:
    """Serve the KB to MCP clients over stdio until the client disconnects."""
    load_kb_checked(args)  # fail early, in one line, on an invalid KB
    try:
        from kb_tools.mcp_server import serve
    except ImportError as exc:
        raise KBError(f"the MCP server needs the `mcp` package ({exc.name} is missing): "
                      f"{MCP_INSTALL}") from None
    serve(args.kb)
    return EXIT_OK


def add_arguments(p):
    pass
