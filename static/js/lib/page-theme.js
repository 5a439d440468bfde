// The page's say in the diagrams' theme (docs/embedding.md, "Themes"), applied by embed.js:
//   <meta name="hit-enter-theme" content="dark">   (or data-theme="dark" on embed.js's script tag)
// is the theme of every he-* element without a `theme` of its own, and an element on `theme="auto"` (or on none,
// without such a default) follows the page's own color-scheme (its root's, else <meta name="color-scheme">)
// before the reader's preference.
//
// Both reach the elements as inherited custom properties on the document's root, from one stylesheet adopted
// by the document: elements.css reads --he-theme (the default) and --he-page-scheme (what auto resolves to) on
// each :host. Inheritance carries them into every element, one added later or inside another shadow root too,
// so nothing here has to find the elements; and nothing of the author's page is written to (no attribute, no
// inline style): the sheet only declares two --he- properties, at zero specificity, so the author's own
// `:root { --he-theme: light }` still wins.

const THEMES = ["light", "dark", "auto"];
const sheet = new CSSStyleSheet();
let said = null; // the properties last written, to skip rewriting the same
const warned = new Set();

/** The page's default theme: its <meta name="hit-enter-theme">, else data-theme on embed.js's script tag. */
export function pageDefault(doc = document) {
  const meta = doc.querySelector('meta[name="hit-enter-theme" i]');
  const script = [...doc.querySelectorAll("script[data-theme][src]")].find((s) => /\/embed\.js$/.test(new URL(s.src, doc.baseURI).pathname));
  const value = (meta?.content ?? script?.dataset.theme ?? "").trim().toLowerCase();
  if (value && !THEMES.includes(value) && !warned.has(value) && warned.add(value)) console.warn(`Hit Enter: the page's theme must be one of ${THEMES.join(", ")}, not ${JSON.stringify(value)}`);
  return THEMES.includes(value) ? value : null;
}

/**
 * The page's own color-scheme as one theme: "light" or "dark"; null when it sets none, or both ("light dark",
 * which leaves it to the reader's preference, as an element's own "auto" always did).
 */
export function pageScheme(doc = document) {
  const root = getComputedStyle(doc.documentElement).colorScheme; // "normal" unless the page's CSS sets one
  const meta = doc.querySelector('meta[name="color-scheme" i]')?.content ?? "";
  const words = (root && root !== "normal" ? root : meta).toLowerCase().split(/[\s,]+/);
  const light = words.includes("light"), dark = words.includes("dark");
  return light === dark ? null : dark ? "dark" : "light";
}

/** Write the page's default and scheme where elements.css reads them (nothing for "auto" or none). */
function update(doc) {
  const theme = pageDefault(doc), scheme = pageScheme(doc);
  const text = [theme && theme !== "auto" ? `--he-theme: ${theme};` : "", scheme ? `--he-page-scheme: ${scheme};` : ""].join(" ").trim();
  if (text === said) return;
  said = text;
  sheet.replaceSync(text ? `:where(:root) { ${text} }` : "");
}

/**
 * Apply the page's theme to its diagrams, and keep following it: the root's class or style changing (a page's
 * own dark-mode switch), a meta or stylesheet added or changed in the head, the reader's preference (a page's
 * color-scheme may hang on it), stylesheets still loading.
 */
export function followPageTheme(doc = document) {
  if (!doc.adoptedStyleSheets.includes(sheet)) doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
  const again = () => update(doc);
  again();
  const watch = new MutationObserver(again);
  watch.observe(doc.documentElement, { attributes: true });
  if (doc.head) watch.observe(doc.head, { childList: true, subtree: true, attributes: true, characterData: true });
  doc.defaultView?.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", again);
  doc.addEventListener("load", again, true); // a stylesheet's load (captured: it does not bubble)
  doc.defaultView?.addEventListener("load", again, { once: true });
}
