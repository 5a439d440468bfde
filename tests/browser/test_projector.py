"""The projector view and "everyone look at step N", in Chromium (issue 25 point 7): the host opens /host/present/
(it follows the broadcast by itself, in large type), steps a paused broadcast and asks everyone to look at step 1.
A student who has not touched the step bar moves there; one who scrolled it away is offered a jump; a Step by the
host takes the room to the newest step again; when the broadcast ends everyone stays on its last step."""
from playwright.sync_api import expect

from tests.browser.test_replay import shows
from tests.browser.test_workshop import log_in_as_host, open_context

BAR = "#replay-bar"


def test_the_projector_follows_and_everyone_looks_at_the_hosts_step(browser, site_url):
    host_context, host = open_context(browser)
    contexts = [open_context(browser) for _ in range(2)]
    calm, roamer = (page for _, page in contexts)
    try:
        log_in_as_host(host, site_url)
        projector = host_context.new_page()  # the host's session: a second window, on the projector
        projector.errors = []
        projector.on("pageerror", lambda exc: projector.errors.append(str(exc)))
        projector.goto(site_url + "/host/present/")
        expect(projector.locator("#workshop-banner")).to_contain_text("Following the host")  # by itself
        for page in (calm, roamer):
            page.goto(site_url + "/")
            page.locator("#workshop-banner button", has_text="Follow the host").click()
            expect(page.locator("#workshop-banner")).to_contain_text("Following the host")
        # two students; the projector is the host's own window, said apart
        expect(host.locator('[data-stat="following"]')).to_have_text("2 (and your projector view, not counted)")

        host.locator('#broadcast-form input[name="max_new_tokens"]').fill("5")
        host.locator('#broadcast-form input[name="paused"]').check()
        host.locator("#btn-broadcast").click()
        for step in (1, 2, 3):
            expect(host.locator('[data-verb="step"]')).to_be_enabled(timeout=30_000)
            host.locator('[data-verb="step"]').click()
            for page in (projector, calm, roamer):
                expect(page.locator(BAR)).to_have_attribute("data-steps", str(step), timeout=30_000)
        roamer.locator(f'{BAR} [data-replay="first"]').click()  # this student scrolls back on their own
        expect(roamer.locator(BAR)).to_have_attribute("data-position", "0")

        host.locator("#look-step").fill("1")
        host.locator("#btn-look").click()
        for page in (projector, calm):
            expect(page.locator(BAR)).to_have_attribute("data-position", "1")
            shows(page, "he-sequence", "data-step", 1)
        jump = roamer.locator("#workshop-banner [data-jump]")
        expect(jump).to_have_text("Jump to the host's step (step 1)")
        expect(roamer.locator(BAR)).to_have_attribute("data-position", "0")  # their own choice stands
        jump.click()
        expect(roamer.locator(BAR)).to_have_attribute("data-position", "1")
        expect(jump).to_have_count(0)

        host.locator('[data-verb="step"]').click()  # the host moves the run on: the room follows its newest step
        for page in (projector, calm, roamer):
            expect(page.locator(BAR)).to_have_attribute("data-position", "4")
        host.locator('[data-verb="resume"]').click()
        expect(host.locator("#broadcast-state")).to_contain_text("finished")
        for page in (projector, calm, roamer):
            expect(page.locator(BAR)).to_have_attribute("data-steps", "5")
            expect(page.locator(BAR)).to_have_attribute("data-position", "5")  # the end: the last step
        size = projector.evaluate("getComputedStyle(document.querySelector('main')).zoom")
        assert float(size) > 1.2, size  # large type on the projector
        for page in (host, projector, calm, roamer):
            assert not page.errors, page.errors
    finally:
        for context in [host_context] + [c for c, _ in contexts]:
            context.close()
