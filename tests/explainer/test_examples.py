"""The example runs shipped in static/examples/: valid current recordings of SmolLM2-135M-Instruct, reproducible,
each with a gzipped sibling that WhiteNoise serves with Content-Encoding."""
import copy
import gzip
import json
from pathlib import Path

import pytest

from explainer.management.commands.record_examples import (EXAMPLES, FIRST_PAINT_WIRE_BYTES, HEAVY_STEP_ATTENTION,
                                                          MAX_FILE_BYTES, MAX_WIRE_BYTES, MODEL_SPEC,
                                                          load_example_model, record)
from explainer.embeds import SECTIONS
from explainer.services import recordings, slices
from inference.wire.schema import SCHEMA_VERSION
from inference.wire.upgrades import with_defaults

FOLDER = Path(__file__).resolve().parents[2] / "static" / "examples"
INDEX = json.loads((FOLDER / "index.json").read_text())


def shipped(entry: dict) -> dict:
    return json.loads((FOLDER / entry["file"]).read_bytes())


def test_index_lists_every_example_with_the_default_prompt_first():
    assert [e["id"] for e in INDEX] == [e["id"] for e in EXAMPLES]
    assert len(INDEX) >= 3
    assert INDEX[0]["prompt"] == "The mole on my face may need a biopsy. Explain this simply." and INDEX[0]["lang"] == "en"
    for entry in INDEX:
        assert set(entry) == {"id", "title", "titles", "prompt", "file", "slices"} | ({"first_paint", "lang"} if "lang" in entry else set())
        assert (FOLDER / entry["file"]).is_file()


def test_each_language_of_the_site_has_its_own_first_example_in_that_language():
    """Issue 28: a page in French paints the article's prompt in French first (the sentence the prompt box offers),
    and every example's title is given in each of the site's languages."""
    from django.conf import settings
    from inference.languages import SENTENCES
    by_lang = {e["lang"]: e for e in INDEX if "lang" in e}
    assert sorted(by_lang) == sorted(code for code, _ in settings.LANGUAGES)
    sentence = {line.lang: line.text for line in SENTENCES}
    for code, entry in by_lang.items():
        assert entry["prompt"] == sentence[code.split("-")[0]] == shipped(entry)["messages"][-1]["content"]
    for entry in INDEX:
        assert sorted(entry["titles"]) == sorted(by_lang) and entry["titles"]["en"] == entry["title"]
        assert all(title != entry["title"] for code, title in entry["titles"].items() if code != "en"), entry["titles"]


@pytest.mark.parametrize("entry", INDEX, ids=[e["id"] for e in INDEX])
def test_each_sections_slice_file_is_the_apis_slice_of_the_example(entry):
    """index.json's `slices`: what an `example=` embed downloads, the bytes GET /api/examples/<id>/<section> would
    send (less the section's name), and far less than the whole file; a section without one reads the whole file."""
    whole = shipped(entry)
    for section in SECTIONS:
        name = entry["slices"].get(section)
        if name is None:
            assert slices.heavy_fields(section) == {"attention"}  # its slice would be most of the file
            continue
        data = json.loads((FOLDER / name).read_bytes())
        expected = slices.slice_recording(whole, section, SECTIONS)
        assert data["payloads"] == expected["payloads"] and section in data["slice"]["draws"], (section, name)
        assert data["slice"]["draws"] == expected["slice"]["draws"]
        assert len(gzip.compress((FOLDER / name).read_bytes())) < len((FOLDER / f"{entry['file']}.gz").read_bytes()) / 5


@pytest.mark.parametrize("entry", [e for e in INDEX if "first_paint" in e], ids=lambda e: e["id"])
def test_a_first_paint_file_is_its_example_less_each_steps_attention_rows_and_early_lenses(entry):
    """The first paint keeps the lens of the last step only: the step the page draws first."""
    whole, light = shipped(entry), json.loads((FOLDER / entry["first_paint"]).read_bytes())
    assert len(gzip.compress((FOLDER / entry["first_paint"]).read_bytes())) <= FIRST_PAINT_WIRE_BYTES
    assert len(light["payloads"]) == len(whole["payloads"])
    last = max(i for i, p in enumerate(whole["payloads"]) if p["type"] == "step")
    for i, (a, b) in enumerate(zip(whole["payloads"], light["payloads"])):
        if a["type"] != "step":
            assert a == b
            continue
        kept = {"attention"} if i == last else {"attention", "lens"}
        assert ("lens" in b) == (i == last) and b.get("lens", a["lens"]) == a["lens"]
        assert {k: v for k, v in a.items() if k not in kept} == {k: v for k, v in b.items() if k not in kept}
        assert b["attention"] == {k: v for k, v in a["attention"].items() if k not in HEAVY_STEP_ATTENTION}
        assert set(b["attention"]) == {"mode", "keys"}


@pytest.mark.parametrize("entry", INDEX, ids=[e["id"] for e in INDEX])
def test_example_runs_to_its_end_with_the_lens_at_every_layer(entry):
    data = shipped(entry)
    steps = [p for p in data["payloads"] if p["type"] == "step"]
    done = next(p for p in data["payloads"] if p["type"] == "done")
    assert done["stop_reason"] == "eos" or len(steps) == data["params"]["max_new_tokens"] == 64
    layers = data["payloads"][0]["model"]["layers"]
    prefill = next(p for p in data["payloads"] if p["type"] == "prefill")
    for payload in [prefill, *steps]:
        assert [row["layer"] for row in payload["lens"]] == list(range(layers))


@pytest.mark.django_db
@pytest.mark.parametrize("entry", INDEX, ids=[e["id"] for e in INDEX])
def test_example_is_a_current_recording_of_smollm2(entry):
    raw = (FOLDER / entry["file"]).read_bytes()
    assert len(raw) <= MAX_FILE_BYTES
    data = recordings.parse_body(raw)
    run = recordings.save_run(data)  # the same validation a visitor's saved run goes through
    assert run.schema_version == data["schema_version"] == SCHEMA_VERSION
    # nothing to upgrade: at most the defaults of optional fields added since are filled in (the recipe in
    # docs/architecture.md: such a field needs no re-recorded examples)
    assert recordings.as_json(run)["payloads"] == [with_defaults(copy.deepcopy(p)) for p in data["payloads"]]
    assert data["model_spec"] == MODEL_SPEC
    session = data["payloads"][0]
    assert session["model"]["spec"] == MODEL_SPEC and session["model"]["dtype"] == "float32"
    assert session["model"]["layers"] == 30  # the real SmolLM2-135M, not a stand-in
    assert session["params"]["seed"] == data["seed"]
    assert data["messages"][-1]["content"] == entry["prompt"]


@pytest.mark.parametrize("name", [e["file"] for e in INDEX] + ["index.json"]
                         + sorted({name for e in INDEX for name in e["slices"].values()}))
def test_gzipped_sibling_holds_the_same_bytes(name):
    packed = (FOLDER / f"{name}.gz").read_bytes()
    assert gzip.decompress(packed) == (FOLDER / name).read_bytes()
    assert len(packed) <= MAX_WIRE_BYTES


@pytest.mark.parametrize("entry", INDEX, ids=[e["id"] for e in INDEX])
def test_example_holds_every_payload_a_live_run_sends(entry):
    kinds = [p["type"] for p in shipped(entry)["payloads"]]
    steps = kinds.count("step")
    assert kinds == ["session", "prefill", "check"] + ["step"] * steps + ["done", "check", "check"]
    checks = [p["name"] for p in shipped(entry)["payloads"] if p["type"] == "check"]
    assert checks == ["causal_mask", "embedding_rows_unchanged", "weights_unchanged"]
    done = shipped(entry)["payloads"][-3]
    assert done["steps"] == steps >= 1


def token_trail(payloads: list[dict]) -> dict:
    """What a seeded run must reproduce: prompt ids, each step's token and text, the final text (not timings)."""
    by_type = {p["type"]: p for p in payloads if p["type"] != "step"}
    return {"prompt": [t["id"] for t in by_type["prefill"]["tokens"]],
            "steps": [(s["token"]["id"], s["token"]["text"], s["text_delta"]) for s in payloads if s["type"] == "step"],
            "text": by_type["done"]["text"], "stop": by_type["done"]["stop_reason"]}


def test_recording_the_first_example_again_gives_the_same_tokens():
    example = EXAMPLES[0]
    again = record(load_example_model(), example["messages"], example["params"])
    saved = shipped(INDEX[0])
    assert (again["messages"], again["params"], again["seed"]) == (saved["messages"], saved["params"], saved["seed"])
    assert token_trail(again["payloads"]) == token_trail(saved["payloads"])
    assert len(token_trail(saved["payloads"])["steps"]) > 1
