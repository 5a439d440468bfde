// The article's examples follow the run: "mole", "face" and the sample sentence in the prose become words
// of the visitor's own message (the last user span of the template the model read).

const SMALL = new Set(("a an the and or but if of on in at to for from by with as is are was were be been am do does did "
  + "my your his her its our their me you he she it we they this that these those what which who whom how why when where "
  + "can could may might must shall should will would need needs explain simply please mean means tell about not no yes "
  + "i").split(" "));

/** The visitor's own words as the template holds them: the last user message (or a plain text prompt), or null. */
function userText(prefill) {
  const spans = prefill?.template?.spans || [];
  const user = [...spans].reverse().find((s) => s.role === "user" || s.role === "text");
  if (!user) return null;
  const span = [...prefill.template.text].slice(user.start, user.end).join(""); // spans count code points
  // A span can hold the turn's markers too ("<|user|>", a "user" header line): keep what was typed.
  return span.replace(/<[^<>\s]*>/g, " ").replace(/^\s*(system|user|assistant)\s*\n/, "").trim();
}

/**
 * {1, 2, sentence, one}: two content words in the order they appear and the sentence they come from; `one`
 * true when the visitor typed a single word (or none: then `1` is what they typed), which has no later word.
 */
export function runWords(prefill) {
  const text = userText(prefill);
  if (!text) return null;
  const wordsOf = (t) => t.match(/[\p{L}\p{N}][\p{L}\p{N}'’-]*/gu) || [];
  const contentOf = (t) => wordsOf(t).filter((w) => !SMALL.has(w.toLowerCase()) && w.length > 1);
  const sentences = text.split(/(?<=[.!?])\s+/).map((t) => t.replace(/[.!?]+$/, "").trim().split(/\s+/).slice(0, 14).join(" "));
  const sentence = sentences.find((t) => contentOf(t).length >= 2) || sentences.find((t) => wordsOf(t).length >= 2);
  if (!sentence) { // one word, or only symbols: never borrow the article's "mole"
    const word = wordsOf(text)[0] ?? [...text].slice(0, 24).join("");
    return { 1: word, 2: null, sentence: word, one: true };
  }
  const content = contentOf(sentence);
  const all = wordsOf(sentence);
  const at = content.length ? all.indexOf(content[0]) : 1;
  // Two content words in order; else the one content word and its neighbour, earlier word first.
  const pick = content.length >= 2 ? content : at + 1 < all.length ? [all[at], all[at + 1]] : [all[at - 1], all[at]];
  return { 1: pick[0], 2: pick[1], sentence, one: false };
}

/** Put the run's words into every .run-word of the page (text only, never markup); one word: the one-word prose. */
export function fillRunWords(prefill) {
  const words = runWords(prefill);
  if (!words) return;
  for (const node of document.querySelectorAll(".run-word[data-word]")) {
    const value = words[node.dataset.word];
    if (value && node.textContent !== value) node.textContent = value;
  }
  for (const node of document.querySelectorAll(".run-words-many")) node.hidden = words.one;
  for (const node of document.querySelectorAll(".run-words-one")) node.hidden = !words.one;
}
