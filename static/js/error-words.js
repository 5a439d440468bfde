// What a reader (a visitor, a student in a class) is told for each `error` code (docs/protocol.md, "Error codes"):
// what happened and what to do now. Where the server's own message already says it for a reader (a setting out
// of range, a prompt too long) it is kept; operator detail (an exception's name, a worker's channel) is not
// shown here: it is in the server's log and on the host page. tests/explainer/test_error_words.py keeps every
// documented code here.

const plain = (message) => String(message ?? "").replace(/[.\s]+$/, "");
const reload = "Reload the page and try again.";
const change = "Change it and press Play again.";

const SAYS = {
  bad_json: () => `The page sent the server something it could not read. ${reload}`,
  binary_frame: () => `The page sent the server something it could not read. ${reload}`,
  unknown_type: () => `The page asked the server for something it does not do. ${reload}`,
  missing_field: (m) => `The page left something out (${plain(m)}). ${reload}`,
  wrong_type: (m) => `A setting has the wrong kind of value: ${plain(m)}. ${change}`,
  frame_too_large: () => "That is too much to send at once. Shorten the prompt and press Play again.",
  out_of_range: (m) => `${plain(m)}. ${change}`,
  invalid_value: (m) => `${plain(m)}. ${change}`,
  unknown_param: (m) => `${plain(m)}. ${reload}`,
  invalid_param: (m) => `${plain(m)}. ${change}`,
  invalid_prompt: (m) => `The prompt cannot be run as it is: ${plain(m)}. ${change}`,
  context_window: (m) => `${plain(m)}. Shorten the prompt or ask for fewer new tokens, then press Play.`,
  invalid_state: (m) => `That button does not apply right now (${plain(m)}).`,
  finished: () => "This run has finished. Press Play to start a new one, or fork it at a step.",
  stopping: () => "The run is stopping: wait a moment for it to end.",
  step_pending: () => "The step you asked for is still being computed: wait for it to appear.",
  non_finite: () => "The model computed a number that cannot be shown (not a number, or infinite); that message was left out. The run goes on.",
  not_kept: () => "The server no longer keeps that step's details. Pick a later step, or run the prompt again.",
  no_run: () => "There is no run yet. Press Play first.",
  workshop_pinned: () => "The host has turned off runs of your own: press \"Follow the host\" to watch the host's run.",
  rate_limited: () => "That was a lot of clicks at once. Wait a second and try again.",
  too_many_connections: () => "Too many pages from your network are open on this server. Close some tabs, then reload this one.",
  model_error: () => "The model failed on this run. Press Play to try again; if it keeps failing, tell the host or the site's owner.",
  out_of_memory: () => "The server ran out of memory for this run. Try a shorter prompt or fewer new tokens.",
  no_worker: () => "No model is running on the server right now. Press Play again in a minute, or tell the host.",
  worker_lost: () => "The class server restarted part of itself, the part running your run. Press Play again.",
  quiz_closed: () => "The host has revealed the answer: answers to that question are closed. Wait for the next one.",
  quiz_open: () => "The class is still answering the question: reveal the answer first.",
  no_question: () => "No question is open: ask the class first.",
};

/** The sentence a reader sees for an `error` message, with its code for anyone they report it to. */
export function errorWords(error) {
  const say = SAYS[error?.code];
  return say ? `${say(error.message, error.field)} (${error.code})` : `Error ${error?.code}: ${error?.message}`;
}
