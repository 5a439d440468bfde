"""In Chromium: model output that is markup stays text, and the article runs under its strict CSP unharmed."""
import json
from pathlib import Path

import pytest

MARKUP = "<img src=x onerror=alert(1)>"
BUNDLED = Path(__file__).resolve().parents[2] / "inference" / "bundled"
WATCH_CSP = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""
ELEMENTS = ["template", "tokens", "embeddings", "positions", "mask", "attention", "layers", "logits", "stages",
            "filter", "dice", "sequence", "kv", "stream", "stop", "context", "myths", "timeline", "kvcalc", "batch",
            "speculative", "quant"]  # static/js/article/main.js
EVERY_DIAGRAM = ", ".join(f"he-{name}" for name in ELEMENTS)


def markup_token_ids() -> list[int]:
    """The bundled tokenizer's ids whose decoded text is MARKUP (what the forks will force)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(BUNDLED)
    ids = tokenizer.encode(MARKUP, add_special_tokens=False)
    assert tokenizer.decode(ids) == MARKUP
    return ids


def watch(page) -> dict:
    """Frames received on the page's socket, dialogs opened, console CSP complaints."""
    seen = {"frames": [], "dialogs": [], "console": []}
    page.on("websocket", lambda ws: ws.on("framereceived", lambda text: seen["frames"].append(json.loads(text))))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.on("console", lambda msg: seen["console"].append(msg.text))
    page.add_init_script(WATCH_CSP)
    return seen


def wait_for(page, frames: list, test, what: str, after: int = 0, timeout_s: float = 60) -> dict:
    """The first frame from index `after` on that passes `test`."""
    for _ in range(int(timeout_s * 4)):
        found = next((f for f in frames[after:] if test(f)), None)
        if found is not None:
            return found
        page.wait_for_timeout(250)
    last = [(f.get("type"), f.get("state") or f.get("step"), f.get("message") or f.get("code")) for f in frames[-8:]]
    pytest.fail(f"no {what}; the last frames: {last}")


def send(page, message: dict) -> None:
    """Through the page's own channel for diagram requests (article.js sends `he-request` details)."""
    page.evaluate("m => document.dispatchEvent(new CustomEvent('he-request', {detail: m}))", message)


def open_article(page, site_url, seen) -> None:
    response = page.goto(site_url + "/")
    assert "style-src 'self'" in response.headers["content-security-policy"]  # the policy is in force
    wait_for(page, seen["frames"], lambda f: f.get("state") == "ready", "ready status")


def force_text(page, frames: list, ids: list[int]) -> None:
    """Step, then fork that step to the next id: the generated text becomes exactly those tokens."""
    for n, token_id in enumerate(ids, start=1):
        mark = len(frames)
        send(page, {"type": "step"})
        wait_for(page, frames, lambda f: f.get("type") == "step" and f["step"] == n, f"step {n}", mark)
        mark = len(frames)
        send(page, {"type": "fork", "step": n, "token_id": token_id})
        wait_for(page, frames, lambda f: f.get("type") == "step" and f["step"] == n and f["forced"], f"fork {n}", mark)


def show_every_diagram(page, selector: str) -> None:
    """Diagrams draw only on screen: scroll each into view and let it render."""
    for element in page.locator(selector).all():
        element.scroll_into_view_if_needed()
        page.wait_for_timeout(60)
    page.wait_for_timeout(500)  # an injected <img src=x> would have failed to load by now


def test_markup_in_the_prompt_and_the_generated_text_stays_text(page, site_url):
    ids = markup_token_ids()
    seen = watch(page)
    open_article(page, site_url, seen)
    frames = seen["frames"]
    page.locator("#messages textarea").first.fill(MARKUP)
    page.locator("input[name=max_new_tokens]").fill(str(len(ids) + 1))
    page.locator("input[name=temperature]").fill("0")
    page.locator("#btn-step").click()  # from idle: start paused on the prefill
    wait_for(page, frames, lambda f: f.get("state") == "paused", "paused after the prefill")
    force_text(page, frames, ids)
    mark = len(frames)
    page.locator("#btn-resume").click()
    done = wait_for(page, frames, lambda f: f.get("type") == "done", "done", mark)
    assert done["text"].startswith(MARKUP)  # the model's output really is the markup
    wait_for(page, frames, lambda f: f.get("state") == "finished", "finished", mark)

    show_every_diagram(page, EVERY_DIAGRAM)
    assert seen["dialogs"] == []
    # What an injection would leave behind, whether or not the CSP then stopped its handler from running.
    # Every node, the diagrams' shadow roots included (they draw there).
    every = "(function all(root) { return [...root.querySelectorAll('*')].flatMap(e => [e, ...(e.shadowRoot ? all(e.shadowRoot) : [])]); })(document)"
    assert page.evaluate(f"{every}.filter(e => e.matches('img[onerror], img[src=x], script:not([src])')).length") == 0
    handlers = page.evaluate(f"{every}.flatMap(e => [...e.attributes]"
                             ".filter(a => a.name.startsWith('on')).map(a => `${e.localName} ${a.name}`))")
    assert handlers == []
    assert MARKUP in page.locator("#reply").text_content()
    assert MARKUP in page.locator("he-template .he-template-text").text_content()  # the locator pierces the open shadow root
    page.locator("he-stream").scroll_into_view_if_needed()
    # An arrow function: under script-src 'self' Playwright cannot re-evaluate a bare expression while polling.
    page.wait_for_function("() => document.querySelector('he-stream').shadowRoot.textContent.includes('onerror')", timeout=10_000)
    assert not page.errors, page.errors


def test_a_full_run_raises_no_csp_violation(page, site_url):
    seen = watch(page)
    open_article(page, site_url, seen)
    page.locator("input[name=max_new_tokens]").fill("8")
    page.locator("#btn-play").click()
    wait_for(page, seen["frames"], lambda f: f.get("name") == "weights_unchanged", "the closing checks", timeout_s=120)
    show_every_diagram(page, EVERY_DIAGRAM)
    rendered = page.evaluate("[...document.querySelectorAll('[data-rendered]')].map(e => e.localName)")
    assert {"he-logits", "he-stages", "he-kv", "he-embeddings", "he-positions"} <= set(rendered)
    assert page.evaluate("window.__csp") == []
    assert [m for m in seen["console"] if "Content Security Policy" in m or "Refused to" in m] == []
    assert not page.errors, page.errors
