"""Socket origins (issue 16, finding 3): scheme, host and port must match the request's own origin or a
configured one; the same host on another port or scheme is another origin."""
import pytest
from channels.testing import WebsocketCommunicator

from explainer.asgi import application
from explainer.origins import parse_origin
from explainer.services.device import model_registry
from tests.inference.conftest import STORIES


# ---- origins: scheme, host and port ----------------------------------------------------------------------

@pytest.fixture
def stories_model(settings):
    settings.EXPLAINER_MODEL = str(STORIES)
    model_registry.reset()
    yield
    model_registry.reset()


async def socket_opens(path: str, origin: str, host: str | None = "127.0.0.1:8000", scheme: str = "ws") -> bool:
    headers = [(b"origin", origin.encode())] + ([(b"host", host.encode())] if host else [])
    comm = WebsocketCommunicator(application, path, headers=headers)
    comm.scope["scheme"] = scheme
    connected, _ = await comm.connect(timeout=10)
    await comm.disconnect()
    return connected


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/session/", "/ws/host/"])
@pytest.mark.parametrize("origin, host, scheme", [
    ("http://127.0.0.1:3000", "127.0.0.1:8000", "ws"),  # same host, another port (another program on the machine)
    ("http://localhost:3000", "localhost:8000", "ws"),
    ("http://127.0.0.1", "127.0.0.1:8000", "ws"),  # the default port is a port too
    ("https://127.0.0.1:8000", "127.0.0.1:8000", "ws"),  # another scheme
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "wss"),  # a plain-HTTP page on a TLS socket
    ("http://evil.example:8000", "evil.example:8000", "ws"),  # a host not in ALLOWED_HOSTS, however consistent
])
async def test_sockets_refuse_another_port_or_scheme_of_the_same_host(path, origin, host, scheme, stories_model):
    assert not await socket_opens(path, origin, host, scheme)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("origin, host, scheme", [
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "ws"),
    ("http://localhost:8000", "localhost:8000", "ws"),
    ("https://127.0.0.1", "127.0.0.1", "wss"),
    ("http://127.0.0.1", None, "ws"),  # in-process tests send no Host: an allowed host on the default port
])
async def test_the_sites_own_origin_opens_the_socket(origin, host, scheme, stories_model):
    assert await socket_opens("/ws/session/", origin, host, scheme)


@pytest.mark.django_db(transaction=True)
async def test_configured_origins_match_exactly(settings, stories_model):
    settings.CSRF_TRUSTED_ORIGINS = ["https://hitenter.example.org"]
    assert await socket_opens("/ws/session/", "https://hitenter.example.org", "127.0.0.1:8000")
    assert not await socket_opens("/ws/session/", "https://hitenter.example.org:8443", "127.0.0.1:8000")
    assert not await socket_opens("/ws/session/", "http://hitenter.example.org", "127.0.0.1:8000")
    settings.EXPLAINER_EMBED_ORIGINS = ["https://blog.example.org"]
    assert await socket_opens("/ws/embed/", "https://blog.example.org", "127.0.0.1:8000")
    assert await socket_opens("/ws/embed/", "http://127.0.0.1:8000", "127.0.0.1:8000")  # the embed page itself
    assert not await socket_opens("/ws/embed/", "http://blog.example.org", "127.0.0.1:8000")
    assert not await socket_opens("/ws/embed/", "http://127.0.0.1:3000", "127.0.0.1:8000")


def test_origins_parse_to_scheme_host_and_port():
    assert parse_origin("https://Example.org") == ("https", "example.org", 443)
    assert parse_origin("http://example.org:8080") == ("http", "example.org", 8080)
    assert parse_origin("null") is None and parse_origin("file:///x") is None and parse_origin("http://a:99999") is None
