"""Workshop mode in Chromium: the host logs in and broadcasts; two visitors' pages follow it in sync."""
import json

from playwright.sync_api import expect

from tests.browser.conftest import HOST_PASSWORD
from tests.browser.test_replay import shows


VERBS = ("pause", "step", "resume", "stop")


def open_context(browser):
    """A separate browser (own cookies, own socket), as a second person in the room."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return context, page


def socket_frames(page) -> list[dict]:
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(json.loads(payload))))
    return frames


def log_in_as_host(page, site_url):
    page.goto(site_url + "/host/")
    page.locator("input[name=password]").fill("not the password")
    page.locator(".host-login button[type=submit]").click()
    expect(page.locator(".host .error")).to_have_text("Wrong password.")
    page.locator("input[name=password]").fill(HOST_PASSWORD)
    page.locator(".host-login button[type=submit]").click()
    expect(page.locator("#host-connection")).to_have_text("Connected.")


def generated_ids(page) -> list[str]:
    """The generated tokens' ids in the sequence diagram (scrolled on screen: it draws only there)."""
    page.locator("he-sequence").scroll_into_view_if_needed()
    return [chip.get_attribute("data-id") for chip in page.locator("he-sequence .he-gen").all()]


def test_a_broadcast_reaches_two_browser_contexts_in_sync(browser, site_url):
    host_context, host = open_context(browser)
    contexts = [open_context(browser) for _ in range(2)]
    visitors = [page for _, page in contexts]
    try:
        log_in_as_host(host, site_url)
        frames = []
        for page in visitors:
            frames.append(socket_frames(page))
            page.goto(site_url + "/")
        expect(host.locator('[data-stat="connected"]')).to_have_text("2")
        for verb in VERBS:  # no broadcast yet: nothing to pause, step, resume or stop
            expect(host.locator(f'[data-verb="{verb}"]')).to_be_disabled()

        # The host pins the temperature: both pages show it, not editable.
        host.locator('#pins-form [data-pin="temperature"]').check()
        host.locator('#pins-form input[name="temperature"]').fill("0")
        host.locator("#btn-pin").click()
        for page in visitors:
            expect(page.locator('#params input[name="temperature"]')).to_be_disabled()
            expect(page.locator('#params input[name="temperature"]')).to_have_value("0")
            expect(page.locator("#workshop-banner")).to_contain_text("The host pinned temperature = 0")

        # The host's broadcast form says the pin overrides its temperature (below the controls: nothing moves).
        expect(host.locator("#broadcast-overrides")).to_contain_text("temperature 0.7 → 0")
        # A paused broadcast: the visitors follow it, and the host steps it.
        host.locator('#broadcast-form input[name="max_new_tokens"]').fill("6")
        host.locator('#broadcast-form input[name="paused"]').check()
        host.locator("#btn-broadcast").click()
        for page in visitors:
            expect(page.locator("#workshop-banner")).to_contain_text("The host is broadcasting a run.")
            page.locator("#workshop-banner button").click()
            expect(page.locator("#workshop-banner")).to_contain_text("Following the host's run")
        expect(host.locator('[data-stat="following"]')).to_have_text("2")
        for step in (1, 2):
            host.locator('[data-verb="step"]').click()
            for page in visitors:
                shows(page, "he-sequence", "data-step", step)
        at_two = [generated_ids(page) for page in visitors]
        assert len(at_two[0]) == 2 and at_two[0] == at_two[1]
        for page in visitors:  # whose run it is, said truly (it said "Your live run")
            expect(page.locator("#example-note")).to_have_text(
                "The host's run is drawn below; pick an example to look at a recorded run instead.")
        for page in visitors:
            expect(page.locator("#btn-step")).to_be_disabled()  # paused, but the host drives the run
        expect(host.locator('[data-verb="pause"]')).to_be_disabled()  # paused: only step, resume and stop
        for verb in ("step", "resume", "stop"):
            expect(host.locator(f'[data-verb="{verb}"]')).to_be_enabled()

        host.locator('[data-verb="resume"]').click()
        expect(host.locator("#broadcast-state")).to_contain_text("finished (max new tokens)")  # ended by itself
        for verb in VERBS:
            expect(host.locator(f'[data-verb="{verb}"]')).to_be_disabled()
        for page in visitors:
            shows(page, "he-stop", "data-stop-reason", "max_new_tokens")
        steps = [[f for f in seen if f["type"] == "step"] for seen in frames]
        assert [s["step"] for s in steps[0]] == [1, 2, 3, 4, 5, 6] and steps[0] == steps[1]
        assert next(f for f in frames[0] if f["type"] == "session")["params"]["temperature"] == 0  # the pin
        for page in visitors:  # a finished run stays on its last step: every token shows
            shows(page, "he-sequence", "data-step", len(steps[0]))
        final = [generated_ids(page) for page in visitors]
        assert final[0] == final[1] == [str(s["token"]["id"]) for s in steps[0]]
        assert final[0][:2] == at_two[0]
        assert visitors[0].locator("#reply").inner_text() == visitors[1].locator("#reply").inner_text() != ""
        expect(host.locator("#broadcast-reply")).to_have_text(visitors[0].locator("#reply").inner_text())

        # A visitor goes on alone: the next broadcast no longer reaches that page.
        visitors[1].locator("#workshop-banner button").click()
        expect(visitors[1].locator("#workshop-banner")).not_to_contain_text("Following")
        host.locator('#broadcast-form input[name="paused"]').uncheck()
        host.locator("#btn-broadcast").click()
        sessions = lambda seen: sum(f["type"] == "session" for f in seen)  # noqa: E731
        for _ in range(240):
            if sessions(frames[0]) == 2 and any(f["type"] == "done" for f in frames[0][-12:]):
                break
            visitors[0].wait_for_timeout(250)
        assert sessions(frames[0]) == 2 and sessions(frames[1]) == 1
        for page in [host] + visitors:
            assert not page.errors, page.errors
    finally:
        host.locator("#btn-unpin").click()  # later tests get the site as it was
        expect(host.locator("#pins-now")).to_have_text("nothing")
        for context in [host_context] + [c for c, _ in contexts]:
            context.close()


def test_students_follow_from_the_top_see_the_hosts_prompt_and_the_host_resets(browser, site_url):
    """Workshop mode on, no broadcast yet: "Follow the host" is at the top. A follower's prompt box shows the
    host's prompt, read-only; with own runs off, going alone is refused up front; reset clears it all."""
    host_context, host = open_context(browser)
    student_context, student = open_context(browser)
    try:
        log_in_as_host(host, site_url)
        student.goto(site_url + "/")
        banner = student.locator("#workshop-banner")
        expect(banner.locator("button")).to_have_text("Follow the host")
        assert banner.bounding_box()["y"] < 400  # at the top of the page, not under the prompt box

        # The host pins the temperature: its own broadcast form says what will override it.
        host.locator('#pins-form [data-pin="temperature"]').check()
        host.locator('#pins-form input[name="temperature"]').fill("0")
        host.locator("#btn-pin").click()
        expect(host.locator("#broadcast-overrides")).to_contain_text("temperature 0.7 → 0")
        for name in ("min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
            expect(host.locator(f'#broadcast-form input[name="{name}"]')).to_be_visible()

        banner.locator("button").click()
        expect(banner).to_contain_text("Following the host")
        host.locator('#broadcast-form textarea[name="prompt"]').fill("Tell me about tokens.")
        host.locator('#broadcast-form input[name="paused"]').check()
        host.locator("#btn-broadcast").click()
        expect(student.locator("#messages textarea").first).to_have_value("Tell me about tokens.")
        expect(student.locator('#params input[name="top_k"]')).to_be_disabled()  # the whole box, read-only
        expect(student.locator("#messages textarea").first).to_be_disabled()
        expect(student.locator('#params input[name="temperature"]')).to_have_value("0")
        # A token cap below the broadcast's own: the read-only form shows what the run will use.
        host.locator('#limits-form input[name="max_new_tokens"]').fill("3")
        host.locator("#btn-limits").click()
        expect(student.locator('#params input[name="max_new_tokens"]')).to_have_value("3")

        # Own runs off: "Go on my own" and Play are refused before anything is sent.
        host.locator('#limits-form input[name="own_runs_allowed"]').uncheck()
        host.locator("#btn-limits").click()
        expect(banner.locator("button")).to_be_disabled()
        expect(banner).to_contain_text("turned off runs of your own")
        expect(student.locator("#btn-play")).to_be_disabled()
        assert "(type)" not in student.locator("body").inner_text()

        host.once("dialog", lambda dialog: dialog.accept())
        host.locator("#btn-reset").click()
        expect(host.locator("#pins-now")).to_have_text("nothing")
        expect(host.locator("#broadcast-state")).to_have_text("No broadcast yet.")
        expect(banner.locator("button")).to_be_enabled()
        banner.locator("button").click()  # go on alone: the student's own prompt is back, editable
        expect(student.locator('#params input[name="top_k"]')).to_be_enabled()
        expect(student.locator("#messages textarea").first).not_to_have_value("Tell me about tokens.")
        for page in (host, student):
            assert not page.errors, page.errors
    finally:
        for context in (host_context, student_context):
            context.close()


def test_a_host_whose_page_goes_keeps_the_class_and_takes_the_broadcast_back(browser, site_url):
    """The teacher's laptop drops off the network mid-explanation: the students' pages keep the paused broadcast
    and say until when it waits; the host's page, opened again, steps the same run on."""
    host_context, host = open_context(browser)
    student_context, student = open_context(browser)
    try:
        log_in_as_host(host, site_url)
        student.goto(site_url + "/")
        banner = student.locator("#workshop-banner")
        banner.locator("button", has_text="Follow the host").click()
        expect(banner).to_contain_text("Following the host")
        host.locator('#broadcast-form input[name="max_new_tokens"]').fill("4")
        host.locator('#broadcast-form input[name="paused"]').check()
        host.locator("#btn-broadcast").click()
        expect(host.locator('[data-verb="step"]')).to_be_enabled(timeout=30_000)
        host.locator('[data-verb="step"]').click()
        shows(student, "he-sequence", "data-step", 1)

        host.goto("about:blank")  # the host's page is gone
        expect(banner).to_contain_text("The host's page has disconnected; their run waits here until")
        expect(banner).to_contain_text("Following the host's run")

        host.goto(site_url + "/host/")  # back, logged in still
        expect(host.locator("#host-connection")).to_have_text("Connected.")
        expect(banner).not_to_contain_text("disconnected")
        expect(host.locator('[data-verb="step"]')).to_be_enabled(timeout=30_000)
        host.locator('[data-verb="step"]').click()
        shows(student, "he-sequence", "data-step", 2)
        host.locator('[data-verb="stop"]').click()
        expect(host.locator("#broadcast-state")).to_contain_text("finished")
        for page in (host, student):
            assert not page.errors, page.errors
    finally:
        for context in (host_context, student_context):
            context.close()
