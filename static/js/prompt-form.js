// The article's prompt box: chat messages (role + text) and the sampling parameters, read into a `start`.
import { el } from "./lib/base-element.js";
import { fill, gettext, gettext_noop } from "./lib/i18n.js";

// Each role (the protocol's value) and its label in the list (the reader's words).
const ROLES = { system: gettext_noop("system"), user: gettext_noop("user"), assistant: gettext_noop("assistant") };
const INT_PARAMS = new Set(["top_k", "max_new_tokens", "seed"]);

/** Append one message row; `onChange` runs when it is removed. */
export function addMessage(role = "user", content = "", onChange = () => {}) {
  const list = document.querySelector("#messages");
  const n = list.children.length + 1;
  const item = el("li", { class: "message" });
  const select = el("select", { name: "role", "aria-label": fill(gettext("Role of message %(n)s"), { n }) });
  for (const [r, label] of Object.entries(ROLES)) select.append(el("option", { value: r }, gettext(label)));
  select.value = role;
  const text = el("textarea", { name: "content", rows: "2", "aria-label": fill(gettext("Text of message %(n)s"), { n }) });
  text.value = content;
  const remove = el("button", { type: "button", class: "remove", title: gettext("Remove this message") }, gettext("Remove"));
  remove.addEventListener("click", () => { item.remove(); onChange(); });
  item.append(select, text, remove);
  list.append(item);
  return item;
}

export function readMessages() {
  return [...document.querySelectorAll("#messages .message")].map((li) => ({
    role: li.querySelector("select").value,
    content: li.querySelector("textarea").value,
  }));
}

export function readParams() {
  const params = {};
  for (const input of document.querySelectorAll("#params input[name]")) {
    if (input.type === "range") continue; // mirrored by its number box
    if (input.name === "seed" && input.value.trim() === "") continue; // blank: the server draws a fresh seed
    const value = Number(input.value);
    params[input.name] = INT_PARAMS.has(input.name) ? Math.trunc(value) : value;
  }
  return params;
}

/** Keep each slider and its number box in step. */
export function bindRanges() {
  for (const range of document.querySelectorAll("#params input[type=range]")) {
    const box = document.querySelector(`#params input[type=number][name="${range.dataset.for}"]`);
    if (!box) continue;
    range.addEventListener("input", () => { box.value = range.value; });
    box.addEventListener("input", () => { range.value = box.value; });
  }
}

/** Put a recording's messages and parameters in the prompt box, so Play reruns it live. */
export function fillPromptForm(messages, params, onChange) {
  document.querySelector("#messages").replaceChildren();
  for (const m of messages) addMessage(m.role, m.content, onChange);
  for (const input of document.querySelectorAll("#params input")) {
    const name = input.name || input.dataset.for;
    if (params[name] != null && !input.disabled) input.value = String(params[name]); // pinned by a workshop host
  }
}

/** Enter in a message runs (Shift+Enter: a newline); Ctrl/Cmd+Enter runs from any field of the form.
 *  Enter in a parameter box runs too (the form's implicit submission), so every field agrees. */
export function bindRunKeys(form, run) {
  form.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.isComposing || e.altKey) return; // an IME's Enter confirms the composition
    const inMessage = e.target instanceof HTMLTextAreaElement;
    const withModifier = e.ctrlKey || e.metaKey;
    if (!withModifier && (!inMessage || e.shiftKey)) return; // Shift+Enter: newline; inputs submit by themselves
    e.preventDefault();
    run();
  });
}
