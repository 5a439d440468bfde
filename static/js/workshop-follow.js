// Workshop mode on the article: a banner at the top of the page to follow the host's broadcast run (or go
// on alone), the host's pinned parameters shown in the prompt box, and while following, the host's prompt
// and parameters in that box, read-only. The host's frames arrive as ordinary session, prefill, step and
// done messages, so the page draws them like its own run (docs/protocol.md).
import { fillPromptForm, readMessages, readParams } from "./prompt-form.js";
import { fill, gettext } from "./lib/i18n.js";

/** The parameters the host's run uses: the host's own, with the pins over them and the token cap applied
 * (the server applies both at the start: the read-only form must not say 200 tokens when the cap is 8). */
function effectiveParams(asked, msg) {
  const params = { ...asked, ...(msg.pins || {}) };
  const cap = msg.limits?.max_new_tokens;
  if (cap != null) params.max_new_tokens = Math.min(asked.max_new_tokens ?? cap, cap);
  return params;
}

/** A time of day (seconds since the epoch) as the reader's clock shows it: 10:42. */
function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export class WorkshopFollow {
  following = false;
  autoFollow = false; // the projector view follows the host by itself
  look = null; // the broadcast's latest "everyone look at step N" from the host: {step, at}, or null
  jumpOffer = null; // the host's step, offered with a button because the visitor moved the step bar away themselves
  onLook = () => {}; // called with the host's step when the host asks everyone to look at one
  onJump = () => {}; // the visitor pressed "Jump to the host's step"
  ownRunsAllowed = true;
  request = null; // {messages, params} of the host's broadcast, for "Save run" while following
  #client;
  #banner = null;
  #params = null;
  #onChange = () => {};
  #own = null; // the visitor's own prompt and parameters, put back when they go on alone
  #last = null; // the last `workshop` message
  #drawn = null; // what the banner says now (its text, toggle and notes): redrawn only when that changes
  #autoAskedAt = -Infinity;

  /** Construct before the page listens to the client: this state is current when the page redraws. */
  constructor(client) {
    this.#client = client;
    client.addEventListener("message", (event) => { if (event.detail.type === "workshop") this.#update(event.detail); });
  }

  /** The banner element to fill and the parameters fieldset to pin. */
  bind(banner, params, onChange = () => {}) {
    this.#banner = banner;
    this.#drawn = null; // a new element: drawn afresh
    this.#params = params;
    this.#onChange = onChange;
    if (this.#last) this.#render();
  }

  follow(on) {
    if (!on && !this.ownRunsAllowed) return; // refused up front: the host allows no runs of your own
    this.#client.send({ type: "follow", on });
  }

  #update(msg) {
    this.#last = msg;
    this.following = msg.following;
    this.ownRunsAllowed = msg.limits?.own_runs_allowed !== false;
    const b = msg.broadcast || {};
    this.request = b.messages ? { messages: b.messages, params: effectiveParams(b.params || {}, msg) } : null;
    if (this.autoFollow && !this.following && Date.now() - this.#autoAskedAt > 3000) { // within follow's rate limit
      this.#autoAskedAt = Date.now();
      this.follow(true);
    }
    this.#noteLook(b.look ?? null);
    this.#render();
  }

  /** A new "everyone look at step N" from the host: told to the page once, while following. */
  #noteLook(look) {
    const fresh = look && look.at !== this.look?.at;
    this.look = look;
    if (fresh && this.following) this.onLook(look.step);
  }

  /** Offer (a step) or withdraw (null) the "Jump to the host's step" button. */
  offerJump(step) {
    this.jumpOffer = step;
    if (this.#last) this.#render();
  }

  /** Workshop mode is on from the first `workshop` message: the banner is there from then on. */
  #render() {
    if (!this.#banner) return;
    const msg = this.#last;
    const text = this.following
      ? (msg.host_live ? gettext("Following the host's run: your page shows it step by step.") : gettext("Following the host: waiting for their next run."))
      : (msg.host_live ? gettext("The host is broadcasting a run.") : gettext("Workshop: follow the host to see their runs on your page."));
    const notes = this.#notes(msg);
    this.#banner.hidden = false;
    // Redrawn only when what it says changes: the room's news comes often (every status of the host's run), and
    // a button replaced between a press and its release takes no click.
    const drawn = JSON.stringify([text, this.following, this.ownRunsAllowed, notes, this.jumpOffer]);
    if (drawn !== this.#drawn) this.#draw(text, notes, drawn);
    this.#showHostPrompt();
    this.#pin(msg.pins || {});
  }

  #draw(text, notes, drawn) {
    this.#drawn = drawn;
    this.#banner.replaceChildren();
    this.#banner.dataset.following = String(this.following);
    const button = document.createElement("button");
    button.type = "button";
    button.className = this.following ? "secondary" : "primary";
    button.textContent = this.following ? gettext("Go on my own") : gettext("Follow the host");
    button.disabled = this.following && !this.ownRunsAllowed;
    if (button.disabled) button.title = gettext("the host has turned off runs of your own");
    button.addEventListener("click", () => this.follow(!this.following));
    const line = document.createElement("p");
    line.textContent = text;
    this.#banner.append(line, button);
    if (this.following && this.jumpOffer != null) {
      const jump = document.createElement("button");
      jump.type = "button";
      jump.className = "primary";
      jump.dataset.jump = "";
      jump.textContent = fill(gettext("Jump to the host's step (step %(step)s)"), { step: this.jumpOffer });
      jump.addEventListener("click", () => this.onJump());
      this.#banner.append(jump);
    }
    for (const note of notes) {
      const line = document.createElement("p");
      line.className = "workshop-pinned";
      line.textContent = note;
      this.#banner.append(line);
    }
  }

  /** While following, the prompt box shows the host's prompt and parameters, read-only; then the visitor's again. */
  #showHostPrompt() {
    if (!this.#params) return;
    const form = this.#params.closest("form");
    const host = this.following ? this.request : null;
    if (host && !this.#own) this.#own = { messages: readMessages(), params: readParams() };
    if (host) fillPromptForm(host.messages, host.params, this.#onChange);
    else if (this.#own && !this.following) { fillPromptForm(this.#own.messages, this.#own.params, this.#onChange); this.#own = null; }
    for (const fieldset of form?.querySelectorAll("fieldset") || []) fieldset.disabled = Boolean(host);
    form?.classList.toggle("host-prompt", Boolean(host));
  }

  #notes(msg) {
    const notes = [];
    const pins = Object.entries(msg.pins || {});
    if (pins.length) notes.push(fill(gettext("The host pinned %(pins)s for every run."), { pins: pins.map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ") }));
    const limits = msg.limits || {};
    if (limits.max_new_tokens != null) {
      const n = limits.max_new_tokens;
      notes.push(fill(gettext("New tokens per run: at most %(count)s."), { count: n.toLocaleString("en-US") }));
    }
    if (limits.own_runs_allowed === false) {
      notes.push(this.following ? gettext("The host has turned off runs of your own: you follow the host's run.")
        : gettext("The host has turned off runs of your own: press Follow the host to see the host's run."));
    }
    if (this.following && this.request) notes.push(gettext("The prompt box shows the host's prompt and parameters (read-only)."));
    const b = msg.broadcast || {};
    if (this.following && b.quiz?.state === "open") {
      notes.push(this.autoFollow ? gettext("The class is answering: which token comes next? (the projector shows the question, not the answers)")
        : gettext("The host asks the class: which token comes next? Answer just below."));
    }
    if (msg.host_live && b.host_away_until) notes.push(fill(gettext("The host's page has disconnected; their run waits here until %(time)s."), { time: clock(b.host_away_until) }));
    if (b.state === "ended" && b.stop_reason === "host_left") notes.push(gettext("The host's run has ended: the host left the class."));
    if (b.state === "ended" && b.stop_reason === "server_restarted") {
      notes.push(gettext("The host's run has ended: the class server restarted. The host's next run shows here by itself."));
    }
    return notes;
  }

  /** Pinned parameters: the host's value, not editable; the others are the visitor's again. */
  #pin(pins) {
    if (!this.#params) return;
    for (const input of this.#params.querySelectorAll("input")) {
      const name = input.name || input.dataset.for;
      const pinned = Object.hasOwn(pins, name);
      if (pinned) input.value = String(pins[name]);
      input.disabled = pinned;
      input.classList.toggle("pinned", pinned);
      if (pinned) input.title = gettext("pinned by the workshop host"); else input.removeAttribute("title");
    }
  }
}
