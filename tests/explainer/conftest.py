"""Fixtures shared by the socket tests."""
import gc

import pytest

from explainer.services.admission.start_queue import local_queue
from explainer.services.device import measurements
from explainer.services.device import model_registry
from explainer.services.run.visitor_run import live_sessions
from tests.support import stories_spec


@pytest.fixture
def stories_model(settings):
    """The tiny real Llama as the site's model, two generation slots, and no model kept between tests."""
    settings.EXPLAINER_MODEL = stories_spec()
    settings.EXPLAINER_DEVICE = "cpu"  # the socket tests' figures mean the CPU, also on a machine with CUDA
    settings.EXPLAINER_MAX_SESSIONS = 2
    model_registry.reset()
    measurements.forget()  # cached per server and model: each test measures afresh
    yield settings
    model_registry.reset()
    measurements.forget()


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test starts with empty caches: rate buckets, login failures and causal-mask results of one test never
    reach the next."""
    from django.core.cache import cache

    from explainer.services.run import after_run_checks

    cache.clear()
    after_run_checks.CHECKED.clear()  # a prompt checked by an earlier test is checked afresh


@pytest.fixture(autouse=True)
def no_session_outlives_its_test():
    """Every run a test opened has closed its GenerationSession once the test is over (the leak check).

    A test that drops its socket without disconnecting leaves its run in a reference cycle until the next
    collection; collecting first keeps such garbage out of the next test's figure. Only then: a full collection
    in a worker that has imported the whole suite takes 0.1-0.5 s, and most tests leave nothing to collect.
    """
    yield
    if live_sessions():
        gc.collect()
    assert live_sessions() == 0, f"{live_sessions()} generation session(s) still open after the test"
    assert not len(local_queue), f"{len(local_queue)} start(s) still waiting in line for a slot after the test"
