// What a reader (a visitor, a student in a class) is told for each `error` code (docs/protocol.md, "Error codes"):
// what happened and what to do now. Where the server's own message already says it for a reader (a setting out
// of range, a prompt too long) it is kept; operator detail (an exception's name, a worker's channel) is not
// shown here: it is in the server's log and on the host page. tests/explainer/test_error_words.py keeps every
// documented code here.

import { fill, gettext } from "./lib/i18n.js";

const plain = (message) => String(message ?? "").replace(/[.\s]+$/, "");
/** A sentence with the server's own message in it, that message without its final full stop. */
const withMessage = (sentence, message) => fill(sentence, { message: plain(message) });

const SAYS = {
  bad_json: () => gettext("The page sent the server something it could not read. Reload the page and try again."),
  binary_frame: () => gettext("The page sent the server something it could not read. Reload the page and try again."),
  unknown_type: () => gettext("The page asked the server for something it does not do. Reload the page and try again."),
  missing_field: (m) => withMessage(gettext("The page left something out (%(message)s). Reload the page and try again."), m),
  wrong_type: (m) => withMessage(gettext("A setting has the wrong kind of value: %(message)s. Change it and press Play again."), m),
  frame_too_large: () => gettext("That is too much to send at once. Shorten the prompt and press Play again."),
  out_of_range: (m) => withMessage(gettext("%(message)s. Change it and press Play again."), m),
  invalid_value: (m) => withMessage(gettext("%(message)s. Change it and press Play again."), m),
  unknown_param: (m) => withMessage(gettext("%(message)s. Reload the page and try again."), m),
  invalid_param: (m) => withMessage(gettext("%(message)s. Change it and press Play again."), m),
  invalid_prompt: (m) => withMessage(gettext("The prompt cannot be run as it is: %(message)s. Change it and press Play again."), m),
  context_window: (m) => withMessage(gettext("%(message)s. Shorten the prompt or ask for fewer new tokens, then press Play."), m),
  invalid_state: (m) => withMessage(gettext("That button does not apply right now (%(message)s)."), m),
  finished: () => gettext("This run has finished. Press Play to start a new one, or fork it at a step."),
  stopping: () => gettext("The run is stopping: wait a moment for it to end."),
  step_pending: () => gettext("The step you asked for is still being computed: wait for it to appear."),
  non_finite: () => gettext("The model computed a number that cannot be shown (not a number, or infinite); that message was left out. The run goes on."),
  not_kept: () => gettext("The server no longer keeps that step's details. Pick a later step, or run the prompt again."),
  no_run: () => gettext("There is no run yet. Press Play first."),
  workshop_pinned: () => gettext("The host has turned off runs of your own: press \"Follow the host\" to watch the host's run."),
  rate_limited: () => gettext("That was a lot of clicks at once. Wait a second and try again."),
  too_many_connections: () => gettext("Too many pages from your network are open on this server. Close some tabs, then reload this one."),
  model_error: () => gettext("The model failed on this run. Press Play to try again; if it keeps failing, tell the host or the site's owner."),
  out_of_memory: () => gettext("The server ran out of memory for this run. Try a shorter prompt or fewer new tokens."),
  no_worker: () => gettext("No model is running on the server right now. Press Play again in a minute, or tell the host."),
  worker_lost: () => gettext("The class server restarted part of itself, the part running your run. Press Play again."),
  quiz_closed: () => gettext("The host has revealed the answer: answers to that question are closed. Wait for the next one."),
  quiz_open: () => gettext("The class is still answering the question: reveal the answer first."),
  no_question: () => gettext("No question is open: ask the class first."),
};

/** The sentence a reader sees for an `error` message, with its code for anyone they report it to. */
export function errorWords(error) {
  const say = SAYS[error?.code];
  return say ? `${say(error.message, error.field)} (${error.code})`
    : fill(gettext("Error %(code)s: %(message)s"), { code: String(error?.code), message: String(error?.message) });
}
