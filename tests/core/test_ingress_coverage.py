"""Every HTTP server in the product goes through the one ingress guard (driftline/ingress.py), read from the source.

A server added without it fails here, before any hostile request finds it:

1. a web app (FastAPI, Starlette, Flask, aiohttp) is built only inside a function annotated `-> IngressGuard` whose
   every return is `IngressGuard(...)`;
2. uvicorn serves only the result of such a function, with the guard's limits (`**limits.uvicorn_options()`: the
   connection cap and the head deadline);
3. any lower-level server (prometheus_client's, wsgiref's, http.server's, socketserver's, asyncio's, werkzeug's)
   is built only in driftline/ingress.py (`serve_wsgi`, which wraps its app in `WsgiGuard`);
4. the exceptions are listed in EXEMPT with their reason. Empty it rather than grow it.

Imports inside functions count as much as the ones at the top (the commands import uvicorn lazily).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.core.test_layers import ROOT, SOURCES

GUARD = "driftline.ingress.IngressGuard"
INGRESS_FILE = "driftline/ingress.py"
APPS = {"fastapi.FastAPI", "fastapi.applications.FastAPI", "starlette.applications.Starlette", "flask.Flask",
        "aiohttp.web.Application", "quart.Quart", "sanic.Sanic"}
UVICORN = {"uvicorn.run", "uvicorn.Server", "uvicorn.Config", "uvicorn.main.run", "uvicorn.config.Config",
           "uvicorn.server.Server"}
LOW_LEVEL = {"prometheus_client.start_http_server", "prometheus_client.start_wsgi_server",
             "prometheus_client.exposition.start_http_server", "prometheus_client.exposition.start_wsgi_server",
             "wsgiref.simple_server.make_server", "wsgiref.simple_server.WSGIServer", "http.server.HTTPServer",
             "http.server.ThreadingHTTPServer", "socketserver.TCPServer", "socketserver.ThreadingTCPServer",
             "asyncio.start_server", "werkzeug.serving.make_server", "werkzeug.serving.run_simple",
             "aiohttp.web.run_app", "hypercorn.asyncio.serve", "grpc.server", "grpc.aio.server", "waitress.serve"}
LOW_LEVEL_METHODS = {"create_server", "serve_forever", "start_server"}  # loop.create_server(...), server.serve_forever()
# (file, what) -> why it may serve without the guard
EXEMPT = {
    ("worker/oip_grpc.py", "grpc.aio.server"): "HTTP/2 gRPC: a browser page cannot send it (no grpc-web here)",
    ("receiver/otlp_grpc.py", "grpc.server"): "OTLP over HTTP/2 gRPC, as the worker's: bounded by the receiver's token, "
                                              "body bound and connection cap in its own options",
}


def _product_files() -> list[Path]:
    return sorted(path for folder in SOURCES.values() for path in (ROOT / folder).rglob("*.py"))


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it names ("FastAPI" -> "fastapi.FastAPI"), from every import in the module."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([aliases.get(node.id, node.id), *parts])
    return None


def _file_of(module: str) -> Path | None:
    """The source file of a product module (driftline.worker.server -> worker/server.py), or None."""
    package = max((p for p in SOURCES if module == p or module.startswith(p + ".")), key=len, default=None)
    if package is None:
        return None
    rest = module[len(package):].lstrip(".").split(".") if module != package else []
    base = ROOT / SOURCES[package] / Path(*rest) if rest else ROOT / SOURCES[package]
    return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)


def _returns_guard(function: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]) -> bool:
    """Annotated `-> IngressGuard`, and each of its own returns is an `IngressGuard(...)` call."""
    if function.returns is None or ast.unparse(function.returns).strip("'\"") != "IngressGuard":
        return False
    returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Call) and _dotted(r.value.func, aliases) == GUARD
                                 for r in returns)


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, without those of the functions and classes nested in it."""
    found, todo = [], list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return found


def _builds_guarded_app(call: ast.Call, aliases: dict[str, str]) -> bool:
    """Whether `call` is a call of a product function that returns the guard (`create_app(...)`)."""
    name = _dotted(call.func, aliases)
    if name is None or "." not in name:
        return False
    module, _, function = name.rpartition(".")
    path = _file_of(module)
    if path is None:
        return False
    tree = ast.parse(path.read_text())
    found = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name == function), None)
    return found is not None and _returns_guard(found, _aliases(tree))


def problems(source: str, where: str) -> list[str]:
    """What in `source` (the file `where`, relative to the repository) serves HTTP without the ingress guard."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found = []
    enclosing: dict[int, ast.AST | None] = {}
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in _own_nodes(function):
            enclosing[id(node)] = function
    for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
        name = _dotted(call.func, aliases) or ""
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        line = f"{where}:{call.lineno} {name or method}"
        if (where, name) in EXEMPT:
            continue
        if name in APPS:
            function = enclosing.get(id(call))
            if function is None or not _returns_guard(function, aliases):
                found.append(f"{line}: build the app in a function `-> IngressGuard` that returns IngressGuard(app, "
                             "rules)")
        elif name in UVICORN:
            app = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "app"), None)
            if not (isinstance(app, ast.Call) and _builds_guarded_app(app, aliases)):
                found.append(f"{line}: serve only an app built `-> IngressGuard` (create_app(...))")
            if not any(k.arg is None and isinstance(k.value, ast.Call) and isinstance(k.value.func, ast.Attribute)
                       and k.value.func.attr == "uvicorn_options" for k in call.keywords):
                found.append(f"{line}: pass the guard's limits, **limits.uvicorn_options()")
        elif (name in LOW_LEVEL or method in LOW_LEVEL_METHODS) and where != INGRESS_FILE:
            found.append(f"{line}: serve through driftline.ingress.serve_wsgi (the guard's WSGI server)")
    return found


def test_every_http_server_in_the_product_uses_the_ingress_guard():
    found = []
    for path in _product_files():
        found += problems(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "\n".join(found)


def test_the_known_servers_are_found_and_pass():
    """The scan sees the servers that exist (so a pass means something): the worker, the receiver, /metrics."""
    seen = set()
    for path in _product_files():
        tree = ast.parse(path.read_text())
        aliases = _aliases(tree)
        for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
            name = _dotted(call.func, aliases) or ""
            if name in APPS | UVICORN | LOW_LEVEL or name.endswith("serve_wsgi"):
                seen.add((path.relative_to(ROOT).as_posix(), name))
    assert {("worker/server.py", "fastapi.FastAPI"), ("receiver/app.py", "fastapi.FastAPI"),
            ("worker/commands.py", "uvicorn.run"), ("receiver/commands.py", "uvicorn.run"),
            ("driftline/metrics_endpoint.py", "driftline.ingress.serve_wsgi"),
            (INGRESS_FILE, "wsgiref.simple_server.make_server")} <= seen
    assert set(EXEMPT) <= seen, f"no longer needed, remove: {sorted(set(EXEMPT) - seen)}"


@pytest.mark.parametrize("source, where, flagged", [
    ("from fastapi import FastAPI\nimport uvicorn\nuvicorn.run(FastAPI())\n", "collector/web.py", 3),
    ("from fastapi import FastAPI\ndef create_app():\n    return FastAPI()\n", "scheduler/web.py", 1),
    ("from prometheus_client import start_http_server\nstart_http_server(9000)\n", "collector/metrics.py", 1),
    ("import http.server\nhttp.server.ThreadingHTTPServer(('', 0), None).serve_forever()\n", "alerts/x.py", 2),
    ("import asyncio\nasync def f(loop):\n    await loop.create_server(None, '', 0)\n", "worker/x.py", 1),
    ("from fastapi import FastAPI\nfrom driftline.ingress import IngressGuard\n"
     "def create_app() -> IngressGuard:\n    return IngressGuard(FastAPI(), None)\n", "receiver/x.py", 0),
    ("import uvicorn\nfrom driftline.receiver.app import create_app\n"
     "uvicorn.run(create_app(s), **limits.uvicorn_options())\n", "receiver/commands.py", 0),
    ("import uvicorn\nfrom driftline.receiver.app import create_app\nuvicorn.run(create_app(s))\n",
     "receiver/commands.py", 1),
])
def test_the_rules(source, where, flagged):
    assert len(problems(source, where)) == flagged, problems(source, where)
