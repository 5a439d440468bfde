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


# Session-scoped servers that load a model of their own (tests/browser/conftest.py): the tests that use one run on
# one xdist worker, so that the suite starts SmolLM2's Daphne once instead of once per worker (about 8 s of CPU each).
SHARED_SERVERS = ("smollm2_url", "one_slot_url")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """Longest first, so that under `make test` (-n 4) no xdist worker is left finishing a long test alone:
    the endurance tests (marked slow), then the browser tests, then the rest. Each worker that runs browser tests
    starts its own Daphne and Chromium (tests/browser/conftest.py): all of them on one worker took 14 of the
    suite's 26 summed minutes, longer than the rest together."""
    for item in items:
        shared = [name for name in SHARED_SERVERS if name in getattr(item, "fixturenames", ())]
        if shared and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(shared[0]))
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, not is_browser_test(item)))
    result = yield  # xdist's own hook runs here: on a worker under --dist loadgroup it names each item's group
    name_xdist_groups(config, items)
    return result


def name_xdist_groups(config, items) -> None:
    """xdist 3.8 puts an item's xdist_group in its node id ("...::test@group", which the loadgroup scheduler reads)
    by setting item._nodeid, which pytest 9 no longer reads (it keeps item._id): done here where it did not take,
    else every group's tests spread over the workers (tests/test_xdist_groups.py)."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup only
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            from _pytest.nodeid import coerce_node_id  # pytest 9's (on pytest 8 xdist's own naming takes)

            item._id = coerce_node_id(item.nodeid + suffix)


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
