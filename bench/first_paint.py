"""First paint: the bytes the article moves before anyone scrolls, and the time to its first painted diagram.

Starts Daphne on loopback with the Makefile's flags (or uses --url), opens / in Debian's Chromium with an
empty cache, and sums every response's transfer size (CDP Network.loadingFinished.encodedDataLength: the
bytes on the wire, after Content-Encoding) until the network is idle. Then, in a fresh context, it scrolls to
the first diagram and reports performance.now() when it has drawn (data-rendered). Figures only.

    .venv/bin/python bench/first_paint.py                # its own Daphne (bundled model: the page's examples
    .venv/bin/python bench/first_paint.py --url http://127.0.0.1:8000   # need no model), 3 repeats
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BUDGET_BYTES = 400_000  # issue 13: the first paint transfers at most 400 KB
FIRST_DIAGRAM = "he-template"  # the article's first section with a diagram
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@dataclass
class Weight:
    """What the first paint moved: bytes on the wire, bytes decoded, and each request."""
    transferred: int = 0
    requests: list[tuple[str, int]] = field(default_factory=list)  # (url, bytes on the wire)
    failed: list[str] = field(default_factory=list)


def first_paint_weight(browser, url: str) -> Weight:
    """Load ``url`` with an empty cache and sum the transfer sizes until the network has been idle."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    urls: dict[str, str] = {}
    weight = Weight()
    cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))

    def finished(event):
        weight.transferred += int(event["encodedDataLength"])
        weight.requests.append((urls.get(event["requestId"], "?"), int(event["encodedDataLength"])))

    cdp.on("Network.loadingFinished", finished)
    cdp.on("Network.loadingFailed", lambda e: weight.failed.append(urls.get(e["requestId"], "?")))
    page.goto(url, wait_until="networkidle")
    page.wait_for_timeout(500)  # a last late fetch (the example) counts too
    context.close()
    return weight


def time_to_first_diagram(browser, url: str) -> float:
    """Milliseconds from navigation start until the first diagram has drawn the example run."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.goto(url, wait_until="commit")
    page.locator(FIRST_DIAGRAM).scroll_into_view_if_needed()
    page.wait_for_selector(f"{FIRST_DIAGRAM}[data-rendered]", state="attached", timeout=60_000)
    ms = page.evaluate("performance.now()")
    context.close()
    return ms


def serve() -> tuple[subprocess.Popen, str]:
    """Daphne on a free loopback port with the Makefile's limits, the bundled model (the page needs none)."""
    from tests.explainer.live_server import makefile_daphne_limits
    from tests.support import free_port

    port = free_port()
    db = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    env = {**os.environ, "EXPLAINER_MODEL": os.environ.get("EXPLAINER_MODEL", "bundled"), "HF_HUB_OFFLINE": "1",
           "DATABASE_URL": f"sqlite:///{db}", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             *makefile_daphne_limits(), "explainer.asgi:application"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("daphne did not become healthy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an already running site (default: start Daphne here)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    proc, url = (None, args.url.rstrip("/")) if args.url else serve()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS, headless=True)
            weight = first_paint_weight(browser, url + "/")
            times = [time_to_first_diagram(browser, url + "/") for _ in range(args.repeats)]
            browser.close()
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=20)
    figures = {"transferred_bytes": weight.transferred, "budget_bytes": BUDGET_BYTES,
               "ratio_to_budget": round(weight.transferred / BUDGET_BYTES, 3), "requests": len(weight.requests),
               "failed": weight.failed, "first_diagram_ms_median": round(statistics.median(times), 1),
               "first_diagram_ms": [round(t, 1) for t in times]}
    if args.json:
        print(json.dumps({**figures, "by_request": asdict(weight)["requests"]}))
        return
    for request_url, size in sorted(weight.requests, key=lambda r: -r[1]):
        print(f"{size:>9,}  {request_url.removeprefix(url)}")
    print(f"first paint: {weight.transferred:,} bytes in {len(weight.requests)} requests "
          f"({figures['ratio_to_budget']:.2f}× the {BUDGET_BYTES:,}-byte budget); failed: {weight.failed or 'none'}")
    print(f"first diagram drawn after {figures['first_diagram_ms_median']} ms (median of {args.repeats}: "
          f"{figures['first_diagram_ms']})")


if __name__ == "__main__":
    main()
