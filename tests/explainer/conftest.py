"""Fixtures shared by the socket tests."""
import pytest

from explainer.services import measurements, model_registry
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
