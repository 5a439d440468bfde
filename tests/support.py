"""What the socket and server tests share: the test model's path, a free port, a connected visitor socket,
and reading a socket up to the message a test waits for."""
import asyncio
import socket
from pathlib import Path

from channels.testing import WebsocketCommunicator

ROOT = Path(__file__).resolve().parents[1]
# The real pretrained 260K-parameter Llama (MIT, karpathy/tinyllamas), shipped with the tests.
STORIES = ROOT / "tests" / "fixtures" / "models" / "stories260K"
ORIGIN = "http://127.0.0.1"  # in ALLOWED_HOSTS: the article's socket accepts it
HEADERS = [(b"origin", ORIGIN.encode())]


def stories_spec() -> str:
    """The test model as a model spec; if it is missing, require() fails (CI) or skips the test."""
    from tests.conftest import require

    require((STORIES / "config.json").exists(), f"the test model {STORIES}", "it ships in tests/fixtures/models")
    return str(STORIES)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def connect(address: str | None = None, expect_ready: bool = True, path: str = "/ws/session/",
                  headers=HEADERS) -> WebsocketCommunicator:
    """A socket from this site's page, connected; past its `ready` status unless expect_ready is False."""
    from explainer.asgi import application  # Django must be set up (pytest-django) before this import

    comm = WebsocketCommunicator(application, path, headers=headers)
    if address is not None:  # the app has not run yet: it reads this scope when connect() sends its event
        comm.scope["client"] = [address, 50000]
    connected, _ = await comm.connect()
    assert connected
    if expect_ready:
        assert (await comm.receive_json_from(timeout=30))["state"] == "ready"
    return comm


def matcher(done):
    """A message type ("done"), a set of types ({"detail", "error"}) or a predicate, as a predicate."""
    if callable(done):
        return done
    kinds = {done} if isinstance(done, str) else set(done)
    return lambda m: m.get("type") in kinds


async def until(comm, done, timeout: float = 60, total: float = 300) -> list[dict]:
    """Messages up to and including the first that `done` matches (see matcher): each within `timeout`,
    all within `total` (a socket that never goes quiet, like the host's stats, cannot keep a test waiting).

    An `error` that `done` does not match ends the wait at once with an AssertionError naming it, so a
    broken run (a missing model, say) fails in a second instead of waiting out every timeout."""
    wanted, seen = matcher(done), []
    async with asyncio.timeout(max(timeout, total)):
        while True:
            seen.append(await comm.receive_json_from(timeout=timeout))
            if wanted(seen[-1]):
                return seen
            assert seen[-1].get("type") != "error", f"unexpected error while waiting: {seen[-1]}"


async def settled(condition, what: str, limit_s: float = 30) -> None:
    """Wait until `condition()` holds (the server's side catching up on the event loop); fail naming `what`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {limit_s} s")
        await asyncio.sleep(0.01)


def client_module(folder: Path) -> Path:
    """static/js/client.js as an ES module node can import from `folder`, beside the module it imports."""
    js = ROOT / "static" / "js"
    (folder / "lib").mkdir(exist_ok=True)
    (folder / "lib" / "i18n.mjs").write_text((js / "lib" / "i18n.js").read_text())
    module = folder / "client.mjs"
    module.write_text((js / "client.js").read_text().replace('"./lib/i18n.js"', '"./lib/i18n.mjs"'))
    return module
