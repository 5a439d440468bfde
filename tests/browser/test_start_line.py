"""A full house, seen from the page (issue 25, point 8): every generation slot is taken, so Enter puts the visitor
in line ("You are 1st in line"), Stop leaves the line, and Play again runs as soon as the slot comes back, with no
second press. The slot is held by a script's socket that reads nothing (tests/browser/conftest.py one_slot_url)."""
import json

from playwright.sync_api import expect
from websockets.sync.client import connect

from tests.browser.test_controls import BANNER, finished, open_article
from tests.support import ROOT


def read_until(ws, wanted) -> dict:
    while not wanted(m := json.loads(ws.recv(timeout=60))):
        pass
    return m


def hold_the_slot(ws) -> None:
    """A run whose reader never acks: past 8 unread messages it waits (held), keeping the one slot."""
    read_until(ws, lambda m: m.get("state") == "ready")
    # min_new_tokens: no end-of-sequence token before the window is full, whatever the model would say
    ws.send(json.dumps({"type": "start", "text": "Once upon a time", "params": {"max_new_tokens": 200, "min_new_tokens": 200}}))
    read_until(ws, lambda m: m["type"] == "status" and m.get("run_state") == "held")


def test_a_full_house_puts_the_visitor_in_line_stop_leaves_it_and_the_turn_comes_by_itself(page, one_slot_url):
    with connect(one_slot_url.replace("http", "ws") + "/ws/session/", origin=one_slot_url) as holder:
        hold_the_slot(holder)
        first_paint = {"held": [], "released": False}  # the shipped example's first paint, held until the visitor is in line

        def hold(route):  # however late the page asks for it (under load, after the start), it waits for the line
            if first_paint["released"]:
                route.continue_()
            else:
                first_paint["held"].append(route)

        page.route("**/static/examples/*.first.json", hold)
        box = open_article(page, one_slot_url, "A mole digs.", max_new_tokens=4)
        box.press("Enter")
        in_line = "Every generation slot is taken. You are 1st in line. Stop leaves the line."
        expect(page.locator(BANNER)).to_have_text(in_line, timeout=30_000)
        first_paint["released"] = True
        for route in first_paint["held"]:  # the example arrives while the visitor waits: the place in line stays
            route.continue_()
        # the example was handed to the page and refused: the visitor's start counts as their own run
        page.wait_for_function("() => { const picker = document.querySelector('#example-picker');"
                               " return picker.options.length > 0 && picker.selectedIndex === -1; }", timeout=30_000)
        expect(page.locator(BANNER)).to_have_text(in_line)
        expect(page.locator("#btn-stop")).to_be_enabled()
        expect(page.locator("#btn-play")).to_have_text("Restart")
        expect(page.locator("#btn-resume")).to_be_disabled()
        page.locator("#btn-stop").click()
        expect(page.locator(BANNER)).to_have_text("You left the queue. Press Play to join it again.")
        expect(page.locator("#btn-play")).to_have_text("Play")
        expect(page.locator("#btn-stop")).to_be_disabled()
        box.press("Enter")
        expect(page.locator(BANNER)).to_contain_text("You are 1st in line", timeout=30_000)
        holder.send(json.dumps({"type": "stop"}))  # the slot comes back: the visitor's start runs, unpressed
        holder.send(json.dumps({"type": "ack", "received": 10_000}))
        reason, steps = finished(page)
        assert steps >= 1 and reason in ("eos", "max_new_tokens"), (reason, steps)
        expect(page.locator("#reply")).not_to_have_text("")
        assert not page.errors, page.errors


def test_in_french_the_servers_own_words_about_the_line_are_french(page, one_slot_url):
    """The page's words ("you are 1st in line") and the server's ("You left the queue…", issue 28) in one language:
    the page opens its socket with ?lang=fr, and the server says its sentence in French."""
    french = json.loads((ROOT / "locale" / "strings" / "fr.json").read_text())
    left = "You left the queue. Press Play to join it again."
    with connect(one_slot_url.replace("http", "ws") + "/ws/session/", origin=one_slot_url) as holder:
        hold_the_slot(holder)
        page.goto(one_slot_url + "/?lang=fr")
        expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)
        box = page.locator("#messages textarea").first
        box.fill("Une taupe creuse.")
        box.press("Enter")
        expect(page.locator(BANNER)).to_contain_text("Tous les emplacements de génération sont pris", timeout=30_000)
        page.locator("#btn-stop").click()
        expect(page.locator(BANNER)).to_have_text(french[left])
        assert french[left] != left
        holder.send(json.dumps({"type": "stop"}))
    assert not page.errors, page.errors
