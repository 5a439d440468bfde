// "Save run": post the messages this page received for the current run to /api/runs, show the permalink.
import { fill, gettext, pageLanguage, withLanguage } from "./lib/i18n.js";

// `detail`: what the visitor asked for (every layer's lens of a step, a full attention matrix), so a replay has it too.
// A compare run (issue 29) keeps run B's payloads (`run: "b"`) and the `compare`s, in the order they came, with A's.
const RECORDED = new Set(["session", "prefill", "step", "done", "check", "detail", "compare"]);

function csrfToken() {
  return document.cookie.split("; ").find((c) => c.startsWith("csrftoken="))?.split("=")[1] ?? "";
}

export class RunRecorder {
  constructor(button, link) {
    this.button = button;
    this.link = link;
    this.payloads = [];
    this.request = null; // {messages, params} of the run being recorded
    this.saved = null;   // {id, url} once the current run is saved (an embed code saves it at most once)
    button.addEventListener("click", () => this.save());
  }

  /** Keep every payload of the current run, in the order it arrived (a new `session` starts over). */
  record(msg, request) {
    if (!RECORDED.has(msg.type)) return;
    if (msg.type === "session" && msg.run == null) { this.payloads = []; this.request = request; this.link.hidden = true; }
    else if ((msg.run === "b" || msg.type === "compare") && !this.payloads.length) return; // they belong to run A's recording
    this.payloads.push(msg);
    this.saved = null; // the recording grew (a fork's steps too): a later embed code saves it again
  }

  update(done) { this.button.disabled = !done || !this.request; }

  async save() {
    this.button.disabled = true;
    try {
      await this.savedRun();
    } catch (err) {
      this.link.removeAttribute("href");
      this.link.textContent = fill(gettext("Not saved: %(reason)s"), { reason: err.message });
    }
    this.link.hidden = false;
  }

  /** The current run's {id, url}, posted to /api/runs the first time it is asked for; throws why not. */
  async savedRun() {
    if (this.saved) return this.saved;
    const session = this.payloads[0];
    if (!session || !this.request) throw new Error(gettext("there is no finished run of this page to save"));
    const body = { ...this.request, seed: session.params.seed, model_spec: session.model.spec, payloads: this.payloads };
    // ?lang=: a refusal's sentence (answer.error.message) comes back in the page's language
    const response = await fetch(withLanguage("/api/runs", pageLanguage), {
      method: "POST", body: JSON.stringify(body), credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() } });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error?.message || `HTTP ${response.status}`);
    this.saved = { id: answer.id, url: answer.url };
    this.link.href = answer.url;
    this.link.textContent = fill(gettext("Saved: %(url)s"), { url: `${location.origin}${answer.url}` });
    this.link.hidden = false;
    return this.saved;
  }
}
