"""Shared fixtures: the real pretrained stories260K Llama and the bundled model, loaded once."""
import pytest

from inference.loading import BUNDLED_DIR, load_model
from tests.support import STORIES, stories_spec  # noqa: F401 (STORIES: imported from here by other test modules)


@pytest.fixture(scope="session")
def stories():
    return load_model(stories_spec())


@pytest.fixture(scope="session")
def bundled():
    assert (BUNDLED_DIR / "config.json").exists(), "the bundled model must ship in inference/bundled"
    return load_model("bundled")
