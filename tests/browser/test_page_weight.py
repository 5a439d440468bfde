"""The article's first paint moves at most 400 KB (bytes on the wire, as Chromium counts them), with no 404s."""
from bench.first_paint import BUDGET_BYTES, first_paint_weight


def test_first_paint_transfers_at_most_400_kb(browser, site_url):
    weight = first_paint_weight(browser, site_url + "/")
    by_size = sorted(weight.requests, key=lambda r: -r[1])
    urls = [url for url, _ in weight.requests]
    assert any(url.endswith("/static/examples/biopsy.first.json") for url in urls)  # the example came: its light file
    assert not any(url.endswith("/static/examples/biopsy.json") for url in urls)  # the whole file waits for a scroll
    assert weight.transferred <= BUDGET_BYTES, f"{weight.transferred:,} bytes; largest: {by_size[:8]}"
    assert not weight.failed, weight.failed


def test_examples_come_compressed_and_the_favicon_exists(page, site_url):
    console = []
    page.on("console", lambda msg: msg.type == "error" and console.append(msg.text))
    response = page.request.get(site_url + "/static/examples/biopsy.json", headers={"Accept-Encoding": "gzip"})
    assert response.ok and response.headers["content-encoding"] == "gzip"
    assert page.request.get(site_url + "/favicon.ico").ok  # redirected to the SVG icon
    page.goto(site_url + "/")
    page.wait_for_load_state("networkidle")
    assert not console and not page.errors, (console, page.errors)
