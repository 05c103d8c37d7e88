"""What the worker answers at all: only the Host names it serves, no cross-site browser request, and POST bodies
declared as JSON (the ingress guard, driftline/ingress.py)."""
from __future__ import annotations

import httpx
import pytest

from driftline.hosts import host_allowed, host_name, parse_allowed_hosts
from driftline.worker.server import Worker, WorkerConfig

from tests.support.worker_helpers import MODEL, make_settings, registry_with_versions, serving

TOKEN = "surface-test-token"


@pytest.mark.parametrize("header, name", [
    ("localhost", "localhost"), ("LocalHost:8000", "localhost"), ("127.0.0.1:8000", "127.0.0.1"),
    ("[::1]", "::1"), ("[::1]:8000", "::1"), ("worker.internal:80", "worker.internal"),
    ("", None), ("a:b", None), ("user@evil.example", None), ("evil.example/x", None), ("[::1", None),
])
def test_host_names_are_read_without_their_port(header, name):
    assert host_name(header) == name


def test_only_loopback_names_are_allowed_unless_the_operator_lists_more():
    default = parse_allowed_hosts("")
    for header in ("localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]", "[::1]:8000"):
        assert host_allowed(header, default), header
    for header in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "10.0.0.7:8000", "", None):
        assert not host_allowed(header, default), header
    listed = parse_allowed_hosts("worker.internal, 10.0.0.7:8000")
    assert host_allowed("worker.internal:8000", listed) and host_allowed("10.0.0.7", listed)
    assert host_allowed("localhost:8000", listed) and not host_allowed("evil.example", listed)
    assert host_allowed("evil.example", parse_allowed_hosts("*"))
    with pytest.raises(ValueError, match="not a host name"):
        parse_allowed_hosts("worker.internal:http")


@pytest.fixture(scope="module")
def surface(broker, tiny_results, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("surface"), broker).model_copy(
        update={"retrain_token": TOKEN, "worker_allowed_hosts": "worker.internal"})
    registry_with_versions(settings, tiny_results[:1])
    worker = Worker(settings, WorkerConfig(model=MODEL, device="cpu", listen_for_labels=False, alias_poll_s=0,
                                           log_events=False, faults=True))
    with serving(worker) as url:
        yield url, worker


def test_a_host_the_worker_does_not_serve_gets_400_on_every_path(surface):
    url, worker = surface
    auth = {"Authorization": f"Bearer {TOKEN}"}
    rebound = {"Host": "evil.example"}  # a DNS-rebinding page's requests carry its own name
    for method, path, extra in (("GET", "/healthz", {}), ("GET", "/metrics", {}), ("POST", "/predict", {}),
                                ("GET", "/admin/faults", auth), ("POST", "/admin/faults", auth),
                                ("POST", "/admin/retrain", auth)):
        response = httpx.request(method, f"{url}{path}", json={"skew": True}, headers={**rebound, **extra})
        assert response.status_code == 400, (method, path, response.text)
        assert "worker_allowed_hosts" in response.json()["detail"]
    assert worker.faults.as_dict()["skew"] is False
    port = url.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]", "worker.internal", f"worker.internal:{port}"):
        assert httpx.get(f"{url}/healthz", headers={"Host": host}).status_code == 200, host


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonp"])
def test_a_post_body_not_declared_as_json_gets_415(surface, content_type):
    url, worker = surface
    headers = {"Authorization": f"Bearer {TOKEN}"} | ({"Content-Type": content_type} if content_type else {})
    for path, body in (("/predict", {"features": worker.example}), ("/admin/faults", {"skew": True}),
                       ("/admin/retrain", {"why": "cross-site"})):
        response = httpx.post(f"{url}{path}", content=httpx.Request("POST", url, json=body).content, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert "application/json" in response.json()["detail"]
    assert worker.faults.as_dict()["skew"] is False


@pytest.mark.parametrize("browser, refused", [
    ({"Sec-Fetch-Site": "cross-site"}, True), ({"Sec-Fetch-Site": "same-site"}, True),
    ({"Origin": "http://evil.example"}, True), ({"Origin": "null"}, True),
    ({"Sec-Fetch-Site": "same-origin", "Origin": "http://{host}"}, False), ({"Sec-Fetch-Site": "none"}, False),
    ({"Origin": "http://{host}"}, False), ({}, False),
])
def test_a_cross_site_browser_request_gets_403_and_a_non_browser_client_passes(surface, browser, refused):
    url, worker = surface
    host = url.removeprefix("http://")
    headers = {"Authorization": f"Bearer {TOKEN}"} | {k: v.format(host=host) for k, v in browser.items()}
    for path, body in (("/predict", {"features": worker.example}), ("/admin/faults", {"skew": False})):
        response = httpx.post(f"{url}{path}", json=body, headers=headers)
        assert response.status_code == (403 if refused else 200), (path, response.text)
        if refused:
            assert "cross-origin" in response.json()["detail"]
    assert httpx.get(f"{url}/healthz", headers=headers).status_code == 200  # GET changes nothing: never refused


def test_json_with_parameters_is_json(surface):
    url, worker = surface
    response = httpx.post(f"{url}/predict", content=httpx.Request("POST", url, json={"features": worker.example}).content,
                          headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert response.status_code == 200, response.text


def test_an_allow_list_that_is_not_host_names_is_refused_at_start(broker, tmp_path):
    from driftline.errors import UserError

    settings = make_settings(tmp_path, broker).model_copy(update={"worker_allowed_hosts": "http://x/"})
    with pytest.raises(UserError, match="worker_allowed_hosts"):
        Worker(settings, WorkerConfig(device="cpu"))
