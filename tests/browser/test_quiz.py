"""The class quiz in Chromium (issue 26): a host and 12 followers run ask → answer → reveal → recap.

Each follower's socket is read: between Ask and Reveal no frame of the asked step (its logits, stages, probs,
draw) reaches a follower. Every page's histogram is checked against the answers given, the reveal against the
step that follows it, the downloaded CSV against both; axe finds nothing on the host page, a follower's question
and the reveal.
"""
import csv
import json
import re

from playwright.sync_api import expect

from tests.browser.test_accessibility import AXE, violations
from tests.browser.test_workshop import log_in_as_host, socket_frames
from tests.conftest import require

FOLLOWERS = 12
PICKS = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, None]  # which shown candidate each follower picks (None: no answer)


def context_of(browser, axe=False):
    context = browser.new_context(viewport={"width": 1100, "height": 900}, bypass_csp=axe)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return context, page


def assert_axe_clean(page):
    found = violations(page, frames=False)
    assert not found, "axe-core found:\n" + json.dumps(found, indent=1)


def counts_on(page) -> dict[str, int]:
    """Token label → the class's count, as the page's table shows it."""
    out = {}
    for row in page.locator(".quiz-table tbody tr").all():
        label = row.locator(".quiz-token").inner_text()
        out[label] = int(re.match(r"(\d+) of", row.locator(".quiz-count").inner_text()).group(1))
    return out


def test_a_host_and_twelve_followers_ask_answer_reveal_and_download_the_recap(browser, site_url, tmp_path):
    require(AXE.is_file(), "axe-core from npm (package.json)", "make npm")
    host_context, host = context_of(browser, axe=True)
    contexts = [context_of(browser, axe=i == 0) for i in range(FOLLOWERS)]
    followers = [page for _, page in contexts]
    host.on("dialog", lambda dialog: dialog.accept())
    try:
        log_in_as_host(host, site_url)
        frames = []
        for page in followers:
            frames.append(socket_frames(page))
            page.goto(site_url + "/")
        host.locator('#broadcast-form input[name="max_new_tokens"]').fill("6")
        host.locator('#broadcast-form input[name="temperature"]').fill("0.9")
        host.locator('#broadcast-form input[name="paused"]').check()
        host.locator("#btn-broadcast").click()
        for page in followers:
            page.locator("#workshop-banner button", has_text="Follow the host").click()
            expect(page.locator("#workshop-banner")).to_contain_text("Following the host's run")
        expect(host.locator('[data-stat="following"]')).to_have_text(str(FOLLOWERS))
        expect(host.locator("#btn-ask")).to_be_enabled()

        host.locator("#btn-ask").click()
        for page in followers:
            expect(page.locator("#quiz-card")).to_be_visible()
            expect(page.locator("#quiz-card .quiz-choice")).to_have_count(10)
            expect(page.locator("#workshop-banner")).to_contain_text("which token comes next?")
        expect(host.locator("#btn-reveal")).to_be_enabled()
        for verb in ("step", "resume", "stop"):  # the broadcast waits for the reveal
            expect(host.locator(f'[data-verb="{verb}"]')).to_be_disabled()
        labels = followers[0].locator("#quiz-card .quiz-choice .quiz-token").all_inner_texts()
        for page in followers[1:]:  # one shuffled order for the whole room
            assert page.locator("#quiz-card .quiz-choice .quiz-token").all_inner_texts() == labels
        assert_axe_clean(followers[0])  # a follower's question

        for page, pick in zip(followers, PICKS):
            if pick is None:
                continue
            page.locator("#quiz-card .quiz-choice").nth(pick).click()
            page.locator("#quiz-card button[type=submit]").click()
            expect(page.locator("#quiz-card .quiz-status")).to_contain_text(f"Your answer: {labels[pick]}")
        answered = sum(p is not None for p in PICKS)
        expect(host.locator("#quiz-state")).to_contain_text(f"{answered} of {FOLLOWERS} following have answered")
        expected = {label: PICKS.count(i) for i, label in enumerate(labels)}
        expect(host.locator(".quiz-table tbody tr")).to_have_count(10)
        assert counts_on(host) == expected
        assert host.locator(".quiz-model").count() == 0  # no odds before the reveal, on the host's page either
        assert_axe_clean(host)
        for seen in frames:  # the asked step's odds never reached a follower before the reveal
            assert not [f for f in seen if f["type"] in ("step", "part", "done")], "a follower got the step early"

        host.locator("#btn-reveal").click()
        for page in followers:
            expect(page.locator("#quiz-card")).to_have_attribute("data-state", "revealed")
            expect(page.locator("#quiz-card .quiz-model")).to_have_count(10)
        for page, seen, pick in zip(followers, frames, PICKS):
            page.wait_for_function("() => document.querySelectorAll('#quiz-card .quiz-table tbody tr').length >= 10")
            for _ in range(200):
                if any(f["type"] == "step" for f in seen):
                    break
                page.wait_for_timeout(100)
            step = next(f for f in seen if f["type"] == "step")
            assert step["step"] == 1
            assert counts_on(page) == expected
            drawn = page.locator("#quiz-card tr.quiz-drawn .quiz-token").inner_text()
            token = step["token"]
            assert drawn == ("\u27e8end of reply\u27e9" if token["special"] else f"\u201c{token['text'].replace(' ', chr(0x2423))}\u201d")
            words = page.locator("#quiz-card .quiz-words").inner_text()
            assert f"u = {step['draw']['u']:.3f}" in words and f"of {answered}" in words
            top = step["logits"]["top"][0]
            first_row = page.locator("#quiz-card .quiz-table tbody tr").first  # sorted by the model's odds
            assert "(rank 1)" in first_row.locator(".quiz-model").inner_text()
            assert f"{top['prob'] * 100:.1f}%" in first_row.locator(".quiz-model").inner_text()
            if pick is None:
                expect(page.locator("#quiz-card .quiz-yours")).to_have_text("You did not answer this one.")
                assert page.locator("#quiz-card tr.quiz-mine").count() == 0
            else:
                assert page.locator("#quiz-card tr.quiz-mine .quiz-token").inner_text() == labels[pick]
        assert_axe_clean(followers[0])  # the reveal

        with host.expect_download() as download:
            host.locator("a[href$='quiz.csv']").click()
        path = tmp_path / "quiz.csv"
        download.value.save_as(path)
        rows = list(csv.DictReader(path.open(encoding="utf-8")))
        assert len(rows) == 10
        step = next(f for f in frames[0] if f["type"] == "step")
        probs = {t["id"]: t["prob"] for t in step["logits"]["top"]}
        for row in rows:
            assert int(row["class_answered"]) == answered
            if int(row["token_id"]) in probs:
                assert float(row["model_prob"]) == probs[int(row["token_id"])]
        assert sum(int(r["class_count"]) for r in rows) == answered
        assert [r["drawn"] for r in rows].count("True") == 1
        assert next(r for r in rows if r["drawn"] == "True")["token_id"] == str(step["token"]["id"])
        assert sorted(int(r["class_count"]) for r in rows) == sorted(expected.values())

        host.locator('[data-verb="resume"]').click()  # the broadcast goes on from the revealed step
        expect(host.locator("#broadcast-state")).to_contain_text("finished")
        for page in followers:
            assert not page.errors, page.errors
    finally:
        host.locator("#btn-reset").click()  # the next tests' server starts without this class
        for context, _ in contexts:
            context.close()
        host_context.close()
