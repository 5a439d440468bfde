// "Which token comes next?" on a follower's page (issue 26): the host's question (the text so far and the
// candidates, no odds: the server holds the step back until the reveal), the student's answer (changed until
// the reveal), and at the reveal the class's answers beside the model's probabilities, with the student's own
// answer marked. The question arrives in the `workshop` message (broadcast.quiz); docs/protocol.md.
import { el } from "./lib/base-element.js";
import { quizTable, revealLines, tokenLabel } from "./lib/quiz-chart.js";
import { errorWords } from "./error-words.js";
import { fill, gettext } from "./lib/i18n.js";

/** "Your answer: “␣water”. You can change it until the host reveals." */
function yourAnswer(token) {
  return fill(gettext("Your answer: %(token)s. You can change it until the host reveals."), { token: tokenLabel(token) });
}

const ANSWER_FIELDS = new Set(["question", "choice", "text", "nickname"]);

export class QuizCard {
  #client;
  #workshop;
  #node = null;
  #quiz = null; // broadcast.quiz of the last `workshop` message
  #drawn = ""; // the question id and state drawn: the form is rebuilt only when they change
  #mine = new Map(); // question id → the `answered` reply for this page's answer
  #asking = false; // an answer was sent and not yet answered
  #owned = null; // the last refusal that was this card's

  constructor(client, workshop) {
    this.#client = client;
    this.#workshop = workshop;
    client.addEventListener("message", (event) => this.#onMessage(event.detail));
  }

  bind(node) {
    this.#node = node;
    this.#render();
  }

  /** Whether a message is this card's (the answer's reply or its refusal): the page's banner leaves it alone. */
  owns(msg) {
    return msg.type === "answered" || msg === this.#owned;
  }

  #refuses(msg) {
    return msg.type === "error" && this.#asking
      && (ANSWER_FIELDS.has(msg.field) || msg.code === "quiz_closed" || msg.code === "rate_limited");
  }

  #onMessage(msg) {
    if (msg.type === "workshop") {
      const quiz = msg.following ? msg.broadcast?.quiz ?? null : null;
      this.#quiz = quiz?.state === "open" && !msg.host_live ? null : quiz; // a broadcast that ended mid-question asks nothing
      this.#render();
    } else if (msg.type === "answered") {
      this.#asking = false;
      this.#mine.set(msg.question, msg);
      this.#say(msg.typed_tokens > 1 ? `${yourAnswer(msg.token)} ${fill(gettext("(“%(typed)s” is %(count)s tokens for this model: its first one counts.)"),
        { typed: msg.typed, count: msg.typed_tokens })}` : yourAnswer(msg.token));
    } else if (this.#refuses(msg)) {
      this.#owned = msg;
      this.#asking = false;
      // A refused guess is answered again, not "press Play": the card words its own fields' refusals.
      const own = ANSWER_FIELDS.has(msg.field) && msg.code !== "quiz_closed";
      this.#say(own ? `${msg.message}. (${msg.code})` : errorWords(msg), "error");
    }
  }

  #render() {
    if (!this.#node) return;
    const quiz = this.#quiz;
    this.#node.hidden = !quiz;
    if (!quiz) { this.#drawn = ""; this.#node.replaceChildren(); return; }
    const drawn = `${quiz.id}:${quiz.state}`;
    if (drawn === this.#drawn) return;
    this.#drawn = drawn;
    this.#node.dataset.state = quiz.state;
    this.#node.replaceChildren(...(quiz.state === "open" ? this.#question(quiz) : this.#reveal(quiz)));
  }

  #context(quiz) {
    const text = el("p", { class: "quiz-context" });
    text.append(el("span", { class: "quiz-label" }, `${gettext("The text so far:")} `),
      el("span", { class: "quiz-text" }, quiz.context.reply || gettext("(the reply has not begun: this is its first token)")),
      el("span", { class: "quiz-next", "aria-hidden": "true" }, " ▮"));
    const prompt = el("p", { class: "quiz-prompt" });
    prompt.append(el("span", { class: "quiz-label" }, `${gettext("The prompt:")} `), el("span", { class: "quiz-text" }, quiz.context.prompt));
    return [prompt, text];
  }

  #question(quiz) {
    const title = el("h2", { id: "quiz-title" }, fill(gettext("Which token comes next? (step %(step)s)"), { step: quiz.step }));
    const form = el("form", { class: "quiz-form", autocomplete: "off" });
    const choices = form.appendChild(el("fieldset", { class: "quiz-choices" }));
    choices.append(el("legend", {}, gettext("Pick the token you think the model writes next")));
    const mine = this.#mine.get(quiz.id);
    for (const c of quiz.candidates) {
      const label = choices.appendChild(el("label", { class: "quiz-choice" }));
      const radio = label.appendChild(el("input", { type: "radio", name: "choice", value: String(c.key) }));
      radio.checked = mine?.key === c.key;
      label.append(el("span", { class: "quiz-token" }, tokenLabel(c)));
    }
    const typed = el("label", { class: "quiz-typed" }, `${gettext("…or type it:")} `);
    const input = typed.appendChild(el("input", { type: "text", name: "text", maxlength: "64", spellcheck: "false" }));
    input.addEventListener("input", () => { if (input.value) for (const r of form.elements.choice) r.checked = false; });
    choices.addEventListener("change", () => { input.value = ""; });
    const nick = el("label", { class: "quiz-nick" }, `${gettext("Nickname (optional):")} `);
    nick.append(el("input", { type: "text", name: "nickname", maxlength: "24", autocomplete: "nickname" }));
    const submit = el("button", { type: "submit", class: "primary" }, mine ? gettext("Change my answer") : gettext("Answer"));
    const line = el("p", { class: "quiz-status", role: "status", "aria-live": "polite" },
      mine ? yourAnswer(mine.token) : gettext("The host reveals the model's answer when the class is ready."));
    form.append(typed, nick, submit, line);
    form.addEventListener("submit", (event) => { event.preventDefault(); this.#send(quiz, form); });
    return [title, ...this.#context(quiz), form];
  }

  #send(quiz, form) {
    const picked = [...form.elements.choice].find((r) => r.checked);
    const text = form.elements.text.value;
    if (!picked && !text.trim()) { this.#say(gettext("Pick a token or type one first."), "error"); return; }
    const nickname = form.elements.nickname.value.trim();
    this.#asking = true;
    this.#client.send({ type: "answer", question: quiz.id, ...(picked ? { choice: Number(picked.value) } : { text }),
      ...(nickname ? { nickname } : {}) });
    form.querySelector("button[type=submit]").textContent = gettext("Change my answer");
  }

  #reveal(quiz) {
    const mine = this.#mine.get(quiz.id) ?? null;
    const title = el("h2", { id: "quiz-title" }, fill(gettext("Step %(step)s: the model's answer"), { step: quiz.step }));
    const words = el("div", { class: "quiz-words", role: "status" });
    for (const line of revealLines(quiz)) words.append(el("p", {}, line));
    const drew = mine && mine.token.id === quiz.outcome.token.id;
    const yours = el("p", { class: "quiz-yours" }, !mine ? gettext("You did not answer this one.")
      : fill(drew ? gettext("You picked %(token)s: the token the model drew.") : gettext("You picked %(token)s."), { token: tokenLabel(mine.token) }));
    return [title, ...this.#context(quiz), words, yours, quizTable(quiz, mine)];
  }

  #say(text, kind = "info") {
    const line = this.#node?.querySelector(".quiz-status");
    if (!line) return;
    line.textContent = text;
    line.dataset.kind = kind;
  }
}
