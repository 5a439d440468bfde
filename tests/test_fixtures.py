"""The repository carries what its tests need: a fresh clone with nothing beside it runs the whole suite."""
import subprocess

from tests.support import ROOT, STORIES


def test_the_stories260k_model_ships_with_its_readme_and_licence():
    shipped = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
               "README.md", "LICENSE"}
    assert shipped <= {p.name for p in STORIES.iterdir()}
    assert "MIT License" in (STORIES / "LICENSE").read_text()
    tracked = subprocess.run(["git", "ls-files", str(STORIES.relative_to(ROOT))], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    if tracked:  # in a git checkout: committed, not merely present here (.gitignore drops nothing)
        assert {p.rsplit("/", 1)[-1] for p in tracked} >= shipped


def test_nothing_reads_a_shared_folder_beside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    this = "tests/test_fixtures.py"
    offenders = [f for f in files if f != this and f.endswith((".py", ".md", ".sh", ".js", ".html", ".txt", ".ini", "Makefile"))
                 and any(s in (ROOT / f).read_text(errors="replace") for s in ("../shared", "/shared/models"))]
    assert offenders == []
