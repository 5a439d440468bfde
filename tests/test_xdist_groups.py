"""The tests of one xdist_group run on one xdist worker under `make test` (-n 4 --dist loadgroup): tests/conftest.py
names the groups where xdist 3.8 on pytest 9 does not, and groups the tests of a model-loading server by itself."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent('''
    import os
    import pytest

    @pytest.fixture
    def smollm2_url():
        return "http://127.0.0.1:1"

    def where(name):
        with open(os.path.join(os.environ["PROBE_OUT"], name), "w") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "none"))

    @pytest.mark.parametrize("n", range(4))
    @pytest.mark.xdist_group("together")
    def test_marked(n):
        where(f"marked-{n}")

    @pytest.mark.parametrize("n", range(4))
    def test_on_the_shared_server(n, smollm2_url):
        where(f"server-{n}")

    @pytest.mark.parametrize("n", range(8))
    def test_anywhere(n):
        where(f"free-{n}")
''')


def test_each_group_runs_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBE_OUT": str(out)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:django", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "-o", "addopts=", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = {p.name: p.read_text() for p in out.iterdir()}
    assert len(ran) == 16, sorted(ran)
    assert len({w for n, w in ran.items() if n.startswith("marked-")}) == 1, ran
    assert len({w for n, w in ran.items() if n.startswith("server-")}) == 1, ran
    assert set(ran.values()) == {"gw0", "gw1"}, ran  # the free tests did spread: the probe ran on two workers
