"""Suite-wide test set-up, and require(): the one place a missing prerequisite is judged."""
import asyncio
import os

import pytest

# Tests never touch the network: a hub id must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def in_ci() -> bool:
    """CI=true (GitHub, GitLab and most runners set it): there, nothing may go untested."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def full_range() -> bool:
    """Whether the endurance tests (marked slow in pytest.ini) run their full ranges: under CI=true (.ci/run)
    or FULL_RANGE=1. Otherwise each runs a sample of its range where the behaviour changes; none is skipped."""
    return in_ci() or os.environ.get("FULL_RANGE", "").strip().lower() in ("1", "true", "yes")


def pytest_report_header(config):
    return ("endurance tests (slow): full ranges" if full_range() else
            "endurance tests (slow): sampled ranges (CI=true or FULL_RANGE=1 runs the full ones)")


def require(found, what: str, how: str = ""):
    """`found` if it is truthy; else fail under CI (a skip there would hide an untested part) or skip here.

    what: the prerequisite, e.g. "node"; how: how to get it, e.g. "apt-get install nodejs"."""
    if found:
        return found
    reason = f"{what} is missing" + (f" ({how})" if how else "")
    if in_ci():
        pytest.fail(f"CI=true and {reason}: .ci/run must provide it, a skip would hide an untested part", pytrace=False)
    pytest.skip(reason)


def is_browser_test(item) -> bool:
    return "tests/browser/" in item.nodeid


def pytest_collection_modifyitems(session, config, items):
    """Longest first, so that under `make test` (-n 2) neither xdist worker is left finishing a long test alone:
    the endurance tests (marked slow), then the browser tests, then the rest. Each worker that runs browser tests
    starts its own Daphne and Chromium (tests/browser/conftest.py): all of them on one worker took 14 of the
    suite's 26 summed minutes, longer than the rest together."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, not is_browser_test(item)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Playwright's sync API leaves its event loop marked as running on this thread for as long as the
    session's browser lives; an asyncio test (or asyncio.run) on the same worker after a browser test would
    then fail with "cannot be called from a running event loop". Outside the browser tests that loop is
    hidden, so the order xdist hands tests to a worker does not matter."""
    running = None if is_browser_test(item) else asyncio._get_running_loop()
    if running is not None:
        asyncio._set_running_loop(None)
    try:
        yield
    finally:
        if running is not None:
            asyncio._set_running_loop(running)


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
