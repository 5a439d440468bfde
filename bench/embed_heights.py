"""The height each embed takes once drawn (the article's example run, a 720 px column), as element and as iframe.

Prints them beside the heights static/css/embed.css reserves; with --write, rewrites those reservations, so a
diagram that grew (or shrank) keeps its place on an author's page (docs/embedding.md, "No layout jumps").

    .venv/bin/python bench/embed_heights.py [--write]
"""
import argparse
import contextlib
import functools
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support import free_port  # noqa: E402

CSS = ROOT / "static" / "css" / "embed.css"
ELEMENT_RULE = re.compile(r"^he-([a-z]+) \{ --he-reserve: (\d+)px; \}$", re.M)
IFRAME_RULE = re.compile(r'^iframe\[data-he-embed\]\[src\*="/embed/([a-z]+)/"\] \{ min-height: (\d+)px; \}$', re.M)
SECTIONS = [section for section, _ in ELEMENT_RULE.findall(CSS.read_text())]  # every section has its reservation
# Reservations off while measuring: what is measured is the drawn height, not the reserved one.
UNRESERVED = "<style>body { max-width: 720px; margin: 0 auto; } iframe { width: 100%; border: 0; display: block; min-height: 0 !important; } " \
             + " ".join(f"he-{s} {{ --he-reserve: 0px !important; }}" for s in SECTIONS) + "</style>"


@contextlib.contextmanager
def site():
    """Daphne on a free port (the bundled model: only static files and the examples are read)."""
    port = free_port()
    env = {**os.environ, "EXPLAINER_MODEL": "bundled", "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "explainer.asgi:application"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url + "/healthz", timeout=2)
                break
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def author_site(folder: str):
    """Another origin for the author's pages."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def measure(page, site_url: str, author: str, folder: str, section: str) -> tuple[int, int]:
    body = (f'<he-{section} example="biopsy"></he-{section}>'
            f'<iframe data-he-embed src="{site_url}/embed/{section}/?example=biopsy" title="{section}"></iframe>')
    (Path(folder) / f"{section}.html").write_text(
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{section}</title>{UNRESERVED}'
        f'<script type="module" src="{site_url}/static/js/embed.js"></script></head><body>{body}</body></html>')
    page.goto(f"{author}/{section}.html")
    page.wait_for_function("""() => document.querySelector('[data-he-eager][data-rendered]')
        && document.querySelector('iframe').style.height""", timeout=60_000)
    page.wait_for_timeout(1000)
    return page.evaluate("""[Math.ceil(document.querySelector('[data-he-eager]').getBoundingClientRect().height),
                             Math.ceil(parseFloat(document.querySelector('iframe').style.height))]""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite static/css/embed.css's reservations")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    css = CSS.read_text()
    reserved, framed = dict(ELEMENT_RULE.findall(css)), dict(IFRAME_RULE.findall(css))
    heights = {}
    with site() as site_url, tempfile.TemporaryDirectory() as folder, author_site(folder) as author, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 760, "height": 900})
        for section in SECTIONS:
            heights[section] = measure(page, site_url, author, folder, section)
            element, iframe = heights[section]
            print(f"{section:12} element {element:5} px (reserved {reserved[section]:>5})   "
                  f"iframe {iframe:5} px (reserved {framed[section]:>5})")
        browser.close()
    if args.write:
        css = ELEMENT_RULE.sub(lambda m: f"he-{m[1]} {{ --he-reserve: {heights[m[1]][0]}px; }}", css)
        css = IFRAME_RULE.sub(lambda m: f'iframe[data-he-embed][src*="/embed/{m[1]}/"] {{ min-height: {heights[m[1]][1]}px; }}', css)
        CSS.write_text(css)
        print(f"wrote {CSS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
