"""The inference package stays free of Django and Channels, so it runs without the web side."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import inference

REPO = Path(__file__).resolve().parents[1]
# Every module under inference/, found by walking the package (a new module is covered without a list here).
MODULES = sorted(m.name for m in pkgutil.walk_packages(inference.__path__, "inference."))
PROBE = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("django", "channels", "daphne", "explainer"))
assert not leaked, leaked
print(len(sys.argv) - 1)
"""


def test_the_walk_finds_the_whole_package():
    files = {p.relative_to(REPO).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
             for p in (REPO / "inference").rglob("*.py")}
    assert set(MODULES) | {"inference"} == files


def test_inference_imports_no_django_or_channels():
    # A fresh interpreter: in this one pytest-django has already imported Django.
    result = subprocess.run([sys.executable, "-c", PROBE, *MODULES], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert int(result.stdout.split()[-1]) == len(MODULES)
