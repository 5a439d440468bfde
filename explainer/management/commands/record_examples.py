"""Record the article's example runs on SmolLM2-135M-Instruct into static/examples/ (the page's first paint).

Each example is run exactly as a live socket run sends it (explainer/services/run/visitor_run.py): session, prefill, the
causal-mask check, every step, done and the after-run checks, and written in the recording format of
explainer/services/recordings.py, plus an index.json the page's examples picker lists. Each file gets a .gz
sibling, which WhiteNoise serves with Content-Encoding, so the first paint stays under 400 KB on the wire.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import translation
from django.utils.translation import gettext_noop

from explainer.embeds import SECTIONS
from explainer.services import slices
from explainer.services.run import after_run_checks
from inference.article_checks import weights_checksum
from inference.engine import GenerationSession
from inference.languages import SENTENCES
from inference.loading import LoadedModel, load_model
from inference.wire.schema import SCHEMA_VERSION
from inference.prompting import build_prompt, validate_messages
from inference.sampling import SamplingParams

MODEL_SPEC = "smollm2-135m-instruct"  # the model `make run` serves: the first paint shows a real model's run
MAX_FILE_BYTES = 2_600_000  # a whole example: 64 steps of SmolLM2 with every head's attention row and the full lens
MAX_WIRE_BYTES = 1_300_000  # gzipped, what a visitor who picks an example (or an embed of it) downloads
# The first paint loads the first example without each step's attention rows (its "first paint" file, index.json's
# `first_paint`), held to the first paint's 400 KB in tests/browser; the whole file follows on the first scroll.
FIRST_PAINT_WIRE_BYTES = 260_000
HEAVY_STEP_ATTENTION = ("mean", "heads", "top_keys", "top_weights")  # ~26 KB a step, ~80% of a step's bytes
FIRST_PAINT_DROPS = "lens"  # the logit lens, of every step but the last
# The article's form defaults (templates/index.html): the first example is what Play would run unchanged, to its
# natural end (eos) or the form's max_new_tokens, as every example.
PAGE_PARAMS = {"temperature": 0.7, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
               "presence_penalty": 0.0, "frequency_penalty": 0.0, "max_new_tokens": 64, "seed": 0}
IN = {line.lang: line.text for line in SENTENCES}
EXAMPLES = [
    {"id": "biopsy", "title": gettext_noop("The article's prompt (temperature 0.7, seed 0)"), "lang": "en",
     "messages": [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}],
     "params": PAGE_PARAMS},
    {"id": "greedy", "title": gettext_noop("Greedy decoding (temperature 0): always the top token"),
     "messages": [{"role": "user", "content": "The rash on my arm may need a skin test. Explain this simply."}],
     "params": {**PAGE_PARAMS, "temperature": 0.0}},
    {"id": "hot", "title": gettext_noop("A hot sampler (temperature 1.5): the long tail gets picked"),
     "messages": [{"role": "user", "content": "What does mole mean?"}],
     "params": {**PAGE_PARAMS, "temperature": 1.5}},
    # The article's prompt in each of the page's other languages (issue 28): a page in that language paints it first.
    {"id": "biopsy-fr", "title": gettext_noop("The article's prompt in French (temperature 0.7, seed 0)"), "lang": "fr",
     "messages": [{"role": "user", "content": IN["fr"]}], "params": PAGE_PARAMS},
    {"id": "biopsy-es", "title": gettext_noop("The article's prompt in Spanish (temperature 0.7, seed 0)"), "lang": "es",
     "messages": [{"role": "user", "content": IN["es"]}], "params": PAGE_PARAMS},
    {"id": "biopsy-zh", "title": gettext_noop("The article's prompt in Chinese (temperature 0.7, seed 0)"), "lang": "zh-hans",
     "messages": [{"role": "user", "content": IN["zh"]}], "params": PAGE_PARAMS},
]


def titles(english: str) -> dict[str, str]:
    """An example's title in each of the site's languages (index.json's `titles`; the picker shows the page's)."""
    out = {}
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            out[code] = translation.gettext(english)
    return out


def load_example_model(spec: str = MODEL_SPEC) -> LoadedModel:
    """The examples' model on the CPU in float32, where a seeded run is reproducible."""
    return load_model(spec, device="cpu")


def load_bundled() -> LoadedModel:
    """The bundled model (tests record short runs on it)."""
    return load_example_model("bundled")


def record(loaded: LoadedModel, messages: list[dict], params: dict, model_spec: str = MODEL_SPEC,
           lens: str = "all") -> dict:
    """One run with every payload a live run sends, as a recording (the body POST /api/runs takes). `lens`
    "all": every step carries the logit lens at every layer (a replay cannot ask the server for it)."""
    sampling = SamplingParams.from_dict(params, max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
    prompt = build_prompt(loaded.tokenizer, messages=validate_messages(messages))
    weights_before = weights_checksum(loaded.model)
    session = GenerationSession(loaded, prompt, sampling, lens=lens)
    try:
        payloads = [session.session_payload(), session.prefill(), after_run_checks.causal_mask(session)]
        rows_before = after_run_checks.embedding_rows(session)
        while not session.finished:
            payloads.append(session.step())
        payloads.append(session.done_payload())
        payloads += after_run_checks.after_run(session, rows_before, weights_before)
    finally:
        session.close()
    payloads = json.loads(json.dumps(payloads))  # exactly what a browser would have received
    return {"schema_version": SCHEMA_VERSION, "messages": messages, "params": params, "seed": sampling.seed,
            "model_spec": model_spec, "payloads": payloads}


def first_paint(recording: dict) -> dict:
    """The recording without each step's attention rows (their `mode` and `keys` stay) and without the logit lens
    of every step but the last (the step the page draws first; ~50 KB gzipped): what the article draws first; the
    whole recording replaces it when the visitor first scrolls, presses or types (static/js/replay.js)."""
    last = max(i for i, p in enumerate(recording["payloads"]) if p["type"] == "step")
    payloads = [light_step(p, keep_lens=i == last) if p["type"] == "step" else p
                for i, p in enumerate(recording["payloads"])]
    return {**recording, "payloads": payloads, "first_paint": True}


def light_step(step: dict, keep_lens: bool) -> dict:
    """A step of the first paint: no attention rows; no lens unless it is the step drawn first."""
    light = {**step, "attention": {k: v for k, v in step["attention"].items() if k not in HEAVY_STEP_ATTENTION}}
    if not keep_lens:
        light.pop(FIRST_PAINT_DROPS, None)
    return light


def compact(data) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def write_compressed(path: Path, body: bytes) -> int:
    """Write ``path`` and a .gz sibling (WhiteNoise sends it to browsers that accept gzip); the .gz size."""
    path.write_bytes(body)
    small = gzip.compress(body, compresslevel=9, mtime=0)
    Path(f"{path}.gz").write_bytes(small)
    return len(small)


def write_slices(out: Path, recording: dict) -> dict[str, str]:
    """Beside an example, the slices its embeds download (docs/embedding.md, "What a widget downloads"): one file
    a group of sections that draw the same heavy fields, as GET /api/examples/<id>/<section> cuts it, so a copy of
    static/ served without the server slices as well. A group whose slice is most of the whole file (attention)
    reads the whole file. Returns section -> file name, index.json's `slices`."""
    whole = len(compact(recording))
    files = {}
    for group, members in slices.groups(SECTIONS).items():
        body = compact(slices.slice_recording(recording, members[0], SECTIONS))
        if len(body) > whole // 2:
            continue
        name = f"{recording['id']}.{group}.json"
        write_compressed(out / name, body)
        files.update(dict.fromkeys(members, name))
    return files


class Command(BaseCommand):
    help = "Record the article's example runs on SmolLM2-135M-Instruct into static/examples/."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, default=Path(settings.BASE_DIR) / "static" / "examples",
                            help="folder for the example files and index.json (default: static/examples)")
        parser.add_argument("--slices-only", action="store_true",
                            help="cut the slices and index.json again from the example files already there")
        parser.add_argument("--only", nargs="+", default=None, metavar="ID",
                            help="record only these examples (the others' files are kept, as --slices-only)")

    def handle(self, *args, out: Path, slices_only: bool, only: list[str] | None, **options):
        out.mkdir(parents=True, exist_ok=True)
        unknown = set(only or ()) - {e["id"] for e in EXAMPLES}
        if unknown:
            raise CommandError(f"--only: no example {sorted(unknown)}; one of {[e['id'] for e in EXAMPLES]}")
        loaded = None if slices_only else load_example_model()
        index = []
        for example in EXAMPLES:
            name = f"{example['id']}.json"
            if slices_only or (only and example["id"] not in only):
                recording = json.loads((out / name).read_bytes())
            else:
                recording = {"id": example["id"], "title": example["title"],
                             **record(loaded, example["messages"], example["params"])}
                self.write(out / name, compact(recording), MAX_FILE_BYTES, MAX_WIRE_BYTES)
            entry = {"id": example["id"], "title": example["title"], "titles": titles(example["title"]),
                     "prompt": example["messages"][-1]["content"], "file": name}
            if "lang" in example:  # the one a page in this language paints first
                entry["lang"] = example["lang"]
                entry["first_paint"] = f"{example['id']}.first.json"  # cut again each time: it runs no model
                self.write(out / entry["first_paint"], compact(first_paint(recording)), MAX_FILE_BYTES, FIRST_PAINT_WIRE_BYTES)
            entry["slices"] = write_slices(out, recording)
            index.append(entry)
        write_compressed(out / "index.json", compact(index))
        self.stdout.write(f"index.json: {len(index)} examples in {out}")

    def write(self, path: Path, body: bytes, max_bytes: int, max_wire: int) -> None:
        """Write one example file and its .gz sibling, within its limits; say its steps and sizes."""
        wire = write_compressed(path, body)
        if len(body) > max_bytes or wire > max_wire:
            raise CommandError(f"{path.name} is {len(body):,} bytes ({wire:,} gzipped); the limits are "
                               f"{max_bytes:,} ({max_wire:,} gzipped): lower its max_new_tokens")
        steps = body.count(b'"type":"step"')
        self.stdout.write(f"{path.name}: {steps} steps, {len(body):,} bytes ({wire:,} gzipped)")
