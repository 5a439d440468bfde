// Workshop mode on the article: a banner to follow the host's broadcast run (or go on alone), and the
// host's pinned parameters shown in the prompt box. The host's frames arrive as ordinary session,
// prefill, step and done messages, so the page draws them like its own run (docs/protocol.md).

export class WorkshopFollow {
  following = false;
  request = null; // {messages, params} of the host's broadcast, for "Save run" while following
  #client;
  #banner = null;
  #params = null;
  #last = null; // the last `workshop` message

  /** Construct before the page listens to the client: this state is current when the page redraws. */
  constructor(client) {
    this.#client = client;
    client.addEventListener("message", (event) => { if (event.detail.type === "workshop") this.#update(event.detail); });
  }

  /** The banner element to fill and the parameters fieldset to pin. */
  bind(banner, params) {
    this.#banner = banner;
    this.#params = params;
    if (this.#last) this.#render();
  }

  follow(on) { this.#client.send({ type: "follow", on }); }

  #update(msg) {
    this.#last = msg;
    this.following = msg.following;
    const b = msg.broadcast || {};
    this.request = b.messages ? { messages: b.messages, params: b.params || {} } : null;
    this.#render();
  }

  #render() {
    if (!this.#banner) return;
    const msg = this.#last;
    const text = this.following
      ? (msg.host_live ? "Following the host's run: your page shows it step by step." : "Following the host: waiting for their next run.")
      : (msg.host_live ? "The host is broadcasting a run." : "");
    const notes = this.#notes(msg);
    this.#banner.replaceChildren();
    this.#banner.hidden = !text && !notes.length;
    this.#banner.dataset.following = String(this.following);
    if (text) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = this.following ? "secondary" : "primary";
      button.textContent = this.following ? "Go on my own" : "Follow";
      button.addEventListener("click", () => this.follow(!this.following));
      const line = document.createElement("p");
      line.textContent = text;
      this.#banner.append(line, button);
    }
    for (const note of notes) {
      const line = document.createElement("p");
      line.className = "workshop-pinned";
      line.textContent = note;
      this.#banner.append(line);
    }
    this.#pin(msg.pins || {});
  }

  #notes(msg) {
    const notes = [];
    const pins = Object.entries(msg.pins || {});
    if (pins.length) notes.push(`The host pinned ${pins.map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} for every run.`);
    const limits = msg.limits || {};
    if (limits.max_new_tokens != null) notes.push(`Runs stop after at most ${limits.max_new_tokens} new tokens.`);
    if (limits.own_runs_allowed === false) notes.push("The host has turned off runs of your own: follow the host's run.");
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
      if (pinned) input.title = "pinned by the workshop host"; else input.removeAttribute("title");
    }
  }
}
