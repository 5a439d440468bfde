"""The inference package stays free of Django and Channels, so it runs without the web side."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import sys
import inference, inference.loading, inference.adapters
leaked = sorted(m for m in sys.modules if m.startswith(('django', 'channels')))
assert not leaked, leaked
"""


def test_inference_imports_no_django_or_channels():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
