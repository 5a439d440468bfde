"""docs/architecture.md's recipe "add a field to the step payload" is true: followed in a temporary copy of
inference/, a new optional field reaches the step payload with no schema-version bump, the shipped examples
(recorded before it) still validate and read as its default, and the protocol tables notice it."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "architecture.md"
BIG = ("bundled", "bundled_draft", "training", "kv_configs")  # linked, not copied

# The recipe's steps 1-3 as edits at the places it names: (file, anchor, text inserted after the anchor).
EDITS = [
    ("inference/wire/schema.py", '    "step": {\n        "type": ("str", "\\"step\\""), "schema_version": ("int", ""),\n',
     '        "novel": ("int", "a field added by the recipe", 7),\n'),
    ("inference/wire/records.py", "    stop_reason: str | None\n    texts: dict[int, str]\n", "    novel: int = 7\n"),
    ("inference/capture_records.py", "    return StepRecord(", "novel=10 * session.step_index, "),
    ("inference/wire/builders.py", '        "text_delta": record.text_delta,\n', '        "novel": record.novel,\n'),
]

CHECK = r'''
import json, sys
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.wire.schema import SCHEMA_VERSION, schema_markdown, validate_payload
from inference.wire.upgrades import upgrade
from inference.wire.validation import check_recorded_payload

loaded = load_model("bundled")
session = GenerationSession(loaded, build_prompt(loaded.tokenizer, messages=[{"role": "user", "content": "What is a mole?"}]),
                            SamplingParams.from_dict({"max_new_tokens": 2, "temperature": 0}))
session.prefill()
steps = [session.step(), session.step()]
for step in steps:
    validate_payload(step)
example = json.load(open(sys.argv[1]))
payloads = upgrade(example["payloads"], example["schema_version"])
for payload in payloads:
    check_recorded_payload(payload)
print(json.dumps({"live": [s["novel"] for s in steps], "version": SCHEMA_VERSION, "example_version": example["schema_version"],
                  "example": sorted({p["novel"] for p in payloads if p["type"] == "step"}),
                  "tables_name_it": "`novel`" in schema_markdown()}))
'''


def recipe_text() -> str:
    text = RECIPE.read_text()
    return text[text.index("## Recipe: add a field to the step payload"):].split("\n## ")[0]


def test_the_recipe_names_files_that_exist_and_the_places_it_edits():
    paths = set(re.findall(r"`((?:inference|docs|static|tests)/[\w./*-]+)`", recipe_text()))
    assert {"inference/wire/schema.py", "inference/wire/records.py", "inference/capture_records.py",
            "inference/wire/builders.py", "docs/protocol.md"} <= paths
    for path in paths:
        assert list(ROOT.glob(path)), f"the recipe names {path}, which does not exist"
    for file, anchor, _ in EDITS:
        assert (ROOT / file).read_text().count(anchor) == 1, f"{file} no longer has the place the recipe edits"


def test_following_the_recipe_adds_a_field_without_a_version_bump(tmp_path):
    copy = tmp_path / "inference"
    shutil.copytree(ROOT / "inference", copy, ignore=shutil.ignore_patterns("__pycache__", *BIG))
    for name in BIG:
        (copy / name).symlink_to(ROOT / "inference" / name)
    for file, anchor, text in EDITS:
        path = tmp_path / file
        source = path.read_text()
        path.write_text(source.replace(anchor, anchor + text, 1))
    example = ROOT / "static" / "examples" / "biopsy.json"
    done = subprocess.run([sys.executable, "-c", CHECK, str(example)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["live"] == [10, 20]  # set where the record is made, built into the payload
    assert result["version"] == result["example_version"]  # no bump: the shipped examples are still current
    assert result["example"] == [7]  # recorded before the field: read as its default
    assert result["tables_name_it"]  # docs/protocol.md's tables must be regenerated (test_protocol_docs)
    assert "`novel`" not in (ROOT / "docs" / "protocol.md").read_text()
