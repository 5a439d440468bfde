"""Security (issue 7): Origin checks on sockets, CSRF on every POST, permalinks, immutable recordings,
security headers, and `check --deploy` under the production settings."""
import base64
import os
import secrets
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLResolver, converters, get_resolver, reverse

from explainer import routing
from explainer.asgi import application
from explainer.models import RecordedRun, new_run_id
from explainer.services.device import model_registry
from tests.explainer.test_recordings import body, csrf_client, post, recorded_payloads  # noqa: F401 (a fixture)
from tests.support import stories_spec

REPO = Path(__file__).resolve().parents[2]
SITE_ORIGIN = b"http://127.0.0.1"
FOREIGN_ORIGINS = [b"http://evil.example", b"http://127.0.0.1.evil.example", b"null", None]


@pytest.fixture(autouse=True)
def stories_model(settings):
    settings.EXPLAINER_MODEL = stories_spec()
    model_registry.reset()
    yield
    model_registry.reset()


# ---- sockets: only this site's Origin ------------------------------------------------------------

async def opens(path: str, origin: bytes | None) -> bool:
    comm = WebsocketCommunicator(application, path, headers=[(b"origin", origin)] if origin else [])
    connected, _ = await comm.connect(timeout=10)
    await comm.disconnect()
    return connected


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_session_socket_refuses_foreign_origins(origin):
    assert await opens("/ws/session/", SITE_ORIGIN)  # the control: the site's own page gets in
    assert not await opens("/ws/session/", origin)


def routed(path: str) -> bool:
    return any(p.resolve(path.lstrip("/")) for p in routing.websocket_urlpatterns)


@pytest.mark.django_db(transaction=True)  # the host socket reads its login from the session, in the database
@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_host_socket_refuses_foreign_origins(origin):
    assert routed("/ws/host/")
    assert await opens("/ws/host/", SITE_ORIGIN)  # the control: the site's own host page gets in (then logs in)
    assert not await opens("/ws/host/", origin)


# ---- CSRF on every POST ----------------------------------------------------------------------------

SAMPLE_VALUES = {converters.StringConverter: "x" * 22, converters.SlugConverter: "tokens", converters.IntConverter: 1,
                 converters.PathConverter: "x", converters.UUIDConverter: "00000000-0000-0000-0000-000000000000"}


def every_route() -> list[tuple[str, object]]:
    """(a concrete URL, its view) for each route of the URLconf; the admin by its login page."""
    routes = []
    for pattern in get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            continue
        kwargs = {name: SAMPLE_VALUES[type(conv)] for name, conv in pattern.pattern.converters.items()}
        routes.append((reverse(pattern.name, kwargs=kwargs), pattern.callback))
    return routes + [(reverse("admin:login"), None)]


def test_the_route_list_covers_the_post_views():
    urls = [url for url, _ in every_route()]
    assert {"/api/runs", "/host/", "/admin/login/"} <= set(urls)
    assert any(url.startswith("/runs/") for url in urls) and any(url.startswith("/embed/") for url in urls)


@pytest.mark.django_db
@pytest.mark.parametrize("url, view", every_route(), ids=[url for url, _ in every_route()])
def test_every_post_without_a_csrf_token_is_refused(url, view):
    assert not getattr(view, "csrf_exempt", False), f"{url} is csrf_exempt"
    browser = Client(enforce_csrf_checks=True)
    assert_csrf_refusal(browser.post(url, "{}", content_type="application/json"))
    browser.cookies["csrftoken"] = "a" * 32  # a cookie without the matching token in the form is no better
    assert_csrf_refusal(browser.post(url, {"password": "x", "action": "logout"}))


def assert_csrf_refusal(response):
    assert response.status_code == 403
    assert b"CSRF verification failed" in response.content  # Django's refusal, not the view's own 403


@pytest.mark.django_db
def test_a_post_with_the_token_gets_past_csrf():
    browser, token = csrf_client()
    response = browser.post("/api/runs", "{not json", content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_json"
    foreign = browser.post("/api/runs", "{}", content_type="application/json", HTTP_X_CSRFTOKEN=token,
                           HTTP_ORIGIN="http://evil.example")
    assert foreign.status_code == 403  # a foreign Origin is refused even with the token


# ---- permalinks --------------------------------------------------------------------------------------

def test_run_ids_carry_128_random_bits():
    ids = [new_run_id() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    assert RecordedRun._meta.get_field("id").max_length >= max(map(len, ids))
    raw = [base64.urlsafe_b64decode(i + "=" * (-len(i) % 4)) for i in ids]
    assert min(map(len, raw)) >= 16
    values = [int.from_bytes(r, "big") for r in raw]
    # Every one of the 128 bits varies like a coin: no counter, timestamp or constant part.
    for bit in range(128):
        ones = sum((v >> bit) & 1 for v in values)
        assert 350 < ones < 650, f"bit {bit} is set in {ones} of 1000 ids"


def test_no_run_id_starts_with_a_minus(monkeypatch):
    """A spreadsheet reads "-…" as a formula (the quiz recap's CSV would write it as '-…, unlike the page), a shell
    as an option: such a draw is drawn again."""
    drawn = iter(["-mqfpwXzE7Ryf7S7TlQ4Qg", "-another-leading-minus", "mqfpwXzE7Ryf7S7TlQ4Qg"])
    monkeypatch.setattr("explainer.models.secrets.token_urlsafe", lambda n: next(drawn))
    assert new_run_id() == "mqfpwXzE7Ryf7S7TlQ4Qg"


@pytest.mark.django_db
def test_runs_cannot_be_listed(client):
    assert client.get("/api/runs").status_code in (404, 405)
    assert client.get("/runs/").status_code == 404
    assert client.get("/admin/explainer/recordedrun/").status_code == 302  # staff only: to the login page


WRONG_IDS = ["x" * 22, "AAAAAAAAAAAAAAAAAAAAAA", "0", "abc-_DEF"]
MALFORMED_IDS = ["a" * 200, "' OR 1=1 --", "\u00e9\u00e9", "..%2f..%2fetc", "%00"]


@pytest.mark.django_db
def test_a_wrong_id_looks_like_every_other_wrong_id(client, recorded_payloads, django_assert_num_queries):
    real = post(client, body(recorded_payloads)).json()["id"]
    near = real[:-1] + ("A" if real[-1] != "A" else "B")  # one character off a real id
    answers = set()
    for wrong in [near, *WRONG_IDS]:
        with django_assert_num_queries(1):  # one lookup by primary key, the same work for any id
            response = client.get(f"/api/runs/{wrong}")
        assert response.status_code == 404
        answers.add(response.content)
        assert client.get(f"/runs/{wrong}").status_code == 404
    assert len(answers) == 1  # the same body: nothing says how close a guess was
    with django_assert_num_queries(1):
        assert client.get(f"/api/runs/{real}").status_code == 200
    for malformed in MALFORMED_IDS:  # never a 500
        assert client.get(f"/api/runs/{quote(malformed, safe='%')}").status_code == 404
        assert client.get(f"/runs/{quote(malformed, safe='%')}").status_code == 404


@pytest.mark.django_db
def test_recordings_cannot_be_overwritten(recorded_payloads):
    browser, token = csrf_client()
    first = post(browser, body(recorded_payloads), HTTP_X_CSRFTOKEN=token).json()["id"]
    before = Client().get(f"/api/runs/{first}").json()
    other = body(recorded_payloads, id=first, seed=99, messages=[{"role": "user", "content": "overwritten?"}])
    second = post(browser, other, HTTP_X_CSRFTOKEN=token)
    assert second.status_code == 201 and second.json()["id"] != first
    for method in ("put", "patch", "delete"):
        response = getattr(browser, method)(f"/api/runs/{first}", "{}", content_type="application/json",
                                            HTTP_X_CSRFTOKEN=token)
        assert response.status_code == 405
    assert Client().get(f"/api/runs/{first}").json() == before
    assert RecordedRun.objects.count() == 2


# ---- headers ------------------------------------------------------------------------------------------

def csp(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return {part.split()[0]: " ".join(part.split()[1:]) for part in header.split(";") if part.strip()}


def assert_strict_headers(response, frame_ancestors="'none'"):
    policy = csp(response)
    assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
    assert "unsafe-eval" not in response.headers["Content-Security-Policy"]
    assert policy["default-src"] == policy["script-src"] == policy["style-src"] == "'self'"
    assert policy["object-src"] == policy["base-uri"] == "'none'"
    assert policy["form-action"] == "'self'" and policy["img-src"] == "'self' data:"
    assert policy["connect-src"] == "'self' ws://testserver"  # sockets to this host only
    assert policy["frame-ancestors"] == frame_ancestors
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"


class InlineFinder(HTMLParser):
    """Collects what a strict CSP would refuse: inline scripts, event-handler and style attributes."""

    def __init__(self):
        super().__init__()
        self.found, self.in_script = [], False

    def handle_starttag(self, tag, attrs):
        names = [name for name, _ in attrs]
        self.found += [f"<{tag} {n}=…>" for n in names if n.startswith("on") or n == "style"]
        self.in_script = tag == "script"
        if tag == "script" and "src" not in names:
            self.found.append("<script> without src")

    def handle_data(self, data):
        if self.in_script and data.strip():
            self.found.append(f"inline script: {data.strip()[:40]}")

    def handle_endtag(self, tag):
        self.in_script = False


@pytest.mark.django_db
def test_security_headers_everywhere(client, recorded_payloads):
    run_id = post(client, body(recorded_payloads)).json()["id"]
    for url in ("/", f"/runs/{run_id}", f"/api/runs/{run_id}", "/healthz", "/no-such-page"):
        response = client.get(url)
        assert response.status_code in (200, 404), url
        assert_strict_headers(response)
        assert response.headers["X-Frame-Options"] == "DENY"
    assert csp(client.get("/healthz", secure=True))["connect-src"] == "'self' wss://testserver"


def inline_parts(response) -> list[str]:
    finder = InlineFinder()
    finder.feed(response.content.decode())
    return finder.found


@pytest.mark.django_db
def test_no_page_has_inline_script_or_style(client, settings, recorded_payloads):
    run_id = post(client, body(recorded_payloads)).json()["id"]
    settings.EXPLAINER_HOST_PASSWORD = password = secrets.token_urlsafe(12)
    pages = ["/", f"/runs/{run_id}", "/embed/", "/embed/tokens/", f"/embed/tokens/?run={run_id}", "/host/"]
    seen = {url: client.get(url) for url in pages}
    client.post("/host/", {"password": password})
    seen["/host/ (logged in)"] = client.get("/host/")
    for url, response in seen.items():
        assert response.status_code == 200, url
        assert inline_parts(response) == [], url


@pytest.mark.django_db
def test_embeds_may_be_framed(client, settings):
    response = client.get("/embed/tokens/")
    assert response.status_code == 200
    assert_strict_headers(response, frame_ancestors="*")
    assert "X-Frame-Options" not in response.headers
    settings.EXPLAINER_EMBED_ORIGINS = ["https://blog.example", "https://docs.example"]
    framed = client.get("/embed/tokens/")
    assert framed.status_code == 200 and "X-Frame-Options" not in framed.headers
    assert csp(framed)["frame-ancestors"] == "https://blog.example https://docs.example"
    assert csp(client.get("/embed/no-such-section/"))["frame-ancestors"] == "https://blog.example https://docs.example"


@pytest.mark.parametrize("own, sent", [
    ("default-src 'none'; frame-ancestors https://a.example", "default-src 'none'; frame-ancestors https://a.example"),
    ("frame-ancestors https://a.example", "frame-ancestors https://a.example; default-src 'self'; script-src 'self'"),
])
def test_a_view_set_policy_is_kept_or_completed(rf, own, sent):
    from django.http import HttpResponse

    from explainer.security import SecurityHeadersMiddleware

    middleware = SecurityHeadersMiddleware(lambda request: HttpResponse(headers={"Content-Security-Policy": own}))
    response = middleware(rf.get("/embed/tokens/"))
    assert response["Content-Security-Policy"].startswith(sent) and response.xframe_options_exempt
    assert response["Content-Security-Policy"].count("frame-ancestors") == 1


# ---- production settings -------------------------------------------------------------------------------

def check_deploy(**env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO,
                          env={**clean, "OMP_NUM_THREADS": "1", **env}, capture_output=True, text=True, timeout=300)


def test_check_deploy_is_clean_under_the_production_settings():
    result = check_deploy(DJANGO_SETTINGS_MODULE="explainer.settings_production",
                          DJANGO_SECRET_KEY=secrets.token_urlsafe(64), DJANGO_ALLOWED_HOSTS="hitenter.example.org")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("key, hosts, missing", [
    (None, "hitenter.example.org", "DJANGO_SECRET_KEY"),
    ("short-and-weak", "hitenter.example.org", "DJANGO_SECRET_KEY"),
    ("a" * 80, "hitenter.example.org", "DJANGO_SECRET_KEY"),
    (secrets.token_urlsafe(64), "", "DJANGO_ALLOWED_HOSTS"),
], ids=["no-key", "short-key", "one-character-key", "no-hosts"])  # fixed ids: each xdist worker draws its own secret
def test_production_settings_refuse_to_start_without_their_secrets(key, hosts, missing):
    env = {"DJANGO_SETTINGS_MODULE": "explainer.settings_production", "DJANGO_ALLOWED_HOSTS": hosts}
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    result = check_deploy(**env)
    assert result.returncode != 0 and missing in result.stderr


def test_the_development_settings_are_not_deployable():
    result = check_deploy(DJANGO_SETTINGS_MODULE="explainer.settings")
    # DEBUG is off by default now (issue 16); the development key still fails the check.
    assert result.returncode != 0 and "security.W009" in result.stderr and "security.W018" not in result.stderr
