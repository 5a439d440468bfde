"""HTTP fuzzing (issue 16, finding 4): hypothesis-generated paths, query strings, methods and bodies against
every route, sent through the whole ASGI application as Daphne would: never a 500, never a traceback logged."""
import asyncio
import logging
import re
from urllib.parse import quote, unquote

import pytest
from asgiref.testing import ApplicationCommunicator
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st

from explainer.asgi import application
from explainer.services.device import model_registry
from tests.inference.conftest import STORIES

CONVERTER = re.compile(r"<(?:\w+:)?\w+>")
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"]


def route_templates(patterns=None, prefix: str = "") -> list[str]:
    """Every route as a path with `{}` where a converter takes a value, e.g. /api/runs/{}; admin's included."""
    out = []
    for p in patterns if patterns is not None else get_resolver().url_patterns:
        text = prefix + CONVERTER.sub("{}", str(p.pattern)).lstrip("^").rstrip("$").replace("\\Z", "")
        if isinstance(p, URLResolver):
            out += route_templates(p.url_patterns, text)
        elif isinstance(p, URLPattern) and "(?P" not in text:
            out.append("/" + text)
    return sorted(set(out))


ROUTES = route_templates() + ["/static/{}", "/static/css/{}", "/static/js/{}", "/ws/session/", "/{}"]
segment = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["..", "../..", "%2e%2e", "..%2f..%2fexplainer%2fsettings.py", "%00", "%ff", "\x00", "//", "a" * 300,
                     "../explainer/settings.py", "css/../../manage.py", "%252e", "-", "ü", "\ud800"]),
)
query = st.one_of(st.just(""), st.text(max_size=60), st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4).map(
    lambda d: "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in d.items())))
body = st.one_of(st.just(b""), st.binary(max_size=300), st.sampled_from([b"{}", b"[]", b'{"payloads": [{"type": "session"}]}',
                                                                         b"\xff\xfe", b"null", b'{"seed": 1e999}']))
content_type = st.sampled_from([b"application/json", b"application/x-www-form-urlencoded", b"multipart/form-data; boundary=x",
                                b"text/plain", b""])


def fill(template: str, values: list[str]) -> str:
    for value in values:
        template = template.replace("{}", value, 1)  # raw: request() percent-encodes what is not ASCII
    return template


def ascii_only(text: str) -> str:
    """What a client must send on the request line: everything outside printable ASCII percent-encoded."""
    return "".join(c if " " < c < "\x7f" else quote(c.encode("utf-8", "surrogatepass")) for c in text)


async def request(method: str, raw_path: str, query_string: str, payload: bytes, kind: bytes) -> dict:
    """One request with the scope Daphne builds (daphne/http_protocol.py): the request line is ASCII (other
    bytes are refused before the application), path = unquote(raw_path), query string as sent."""
    raw_path, query_string = ascii_only(raw_path), ascii_only(query_string)
    path = unquote(raw_path)
    scope = {"type": "http", "http_version": "1.1", "method": method, "scheme": "http", "path": path,
             "raw_path": raw_path.encode("ascii"), "root_path": "",
             "query_string": query_string.encode("ascii"), "client": ["127.0.0.1", 50000],
             "server": ["127.0.0.1", 8000],
             "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", kind), (b"content-length", str(len(payload)).encode())]}
    comm = ApplicationCommunicator(application, scope)
    await comm.send_input({"type": "http.request", "body": payload, "more_body": False})
    start = await comm.receive_output(30)
    while (await comm.receive_output(30)).get("more_body"):
        pass
    await comm.wait(5)
    return start


@pytest.fixture
def quiet_model(settings):
    settings.EXPLAINER_MODEL = str(STORIES)
    model_registry.reset()
    yield
    model_registry.reset()


def test_every_route_is_fuzzed():
    assert {"/", "/healthz", "/api/runs", "/api/runs/{}", "/runs/{}", "/embed/", "/embed/{}/", "/host/"} <= set(ROUTES)
    assert any(r.startswith("/admin/") for r in ROUTES)


@pytest.mark.django_db(transaction=True)
@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), values=st.lists(segment, min_size=2, max_size=2), method=st.sampled_from(METHODS),
       query_string=query, payload=body, kind=content_type)
@example(route="/static/{}", values=["../explainer/settings.py", ""], method="GET", query_string="", payload=b"", kind=b"")
@example(route="/static/{}", values=["%2e%2e/%2e%2e/manage.py", ""], method="HEAD", query_string="", payload=b"", kind=b"")
@example(route="/runs/{}", values=["x", ""], method="GET", query_string="a=%ff", payload=b"\xff", kind=b"text/plain")
def test_no_route_answers_500_or_logs_a_traceback(quiet_model, caplog, route, values, method, query_string, payload, kind):
    path = fill(route, values)
    if not path.startswith("/"):
        path = "/" + path
    caplog.clear()
    with caplog.at_level(logging.INFO):
        start = asyncio.run(request(method, path, query_string, payload, kind))
    assert start["status"] < 500, (method, path, query_string, payload)
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not tracebacks, (method, path, tracebacks)
