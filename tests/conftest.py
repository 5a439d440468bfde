"""Suite-wide test set-up."""
import os

# Tests never touch the network: a hub id must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_collection_modifyitems(session, config, items):
    """Browser tests last: Playwright's sync API keeps an event loop running for the rest of the session,
    which the asyncio tests cannot share."""
    items.sort(key=lambda item: "tests/browser/" in item.nodeid)
