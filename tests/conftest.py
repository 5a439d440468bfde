"""Suite-wide test set-up, and require(): the one place a missing prerequisite is judged."""
import os

import pytest

# Tests never touch the network: a hub id must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def in_ci() -> bool:
    """CI=true (GitHub, GitLab and most runners set it): there, nothing may go untested."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(found, what: str, how: str = ""):
    """`found` if it is truthy; else fail under CI (a skip there would hide an untested part) or skip here.

    what: the prerequisite, e.g. "node"; how: how to get it, e.g. "apt-get install nodejs"."""
    if found:
        return found
    reason = f"{what} is missing" + (f" ({how})" if how else "")
    if in_ci():
        pytest.fail(f"CI=true and {reason}: .ci/run must provide it, a skip would hide an untested part", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(session, config, items):
    """Browser tests last: Playwright's sync API keeps an event loop running for the rest of the session,
    which the asyncio tests cannot share."""
    items.sort(key=lambda item: "tests/browser/" in item.nodeid)


@pytest.fixture(autouse=True)
def no_stale_connection_check_outside_db_tests(request, monkeypatch):
    """Channels closes stale database connections before every consumer handler, on the thread where an
    earlier database test opened one; pytest-django blocks the database in tests without a db mark, so
    outside those tests that check would fail with "Database access not allowed" depending on test order."""
    if request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(request.fixturenames):
        return

    async def no_check():
        return None

    for module in ("channels.consumer", "channels.generic.websocket", "channels.generic.http"):
        monkeypatch.setattr(f"{module}.aclose_old_connections", no_check)
