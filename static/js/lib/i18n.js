// The site's own words and numbers in the reader's language (issue 28). On the article, Django's JavaScript
// catalog (/jsi18n/, loaded by base.html before the modules) defines window.django for <html lang>. An element
// on an author's page may ask for another language with `lang=` (or inherit its page's): embed.js loads that
// language's JSON catalog (/jsi18n.json?lang=…) with `loadCatalog`, and each diagram renders inside
// `inLanguage(its language, …)`. Without a catalog (a static copy of static/) the English is shown.
// Model text never goes through here. Strings are marked with gettext(…)/ngettext(…)/gettext_noop(…) by those
// names: `manage.py makemessages -d djangojs` finds them (double-quoted literals only).
const loaded = new Map(); // language -> { gettext, ngettext } from its JSON catalog
let current = null; // the language of the render in progress (inLanguage), else the page's
const loading = {}; // language -> the promise of its catalog
let lookedInline = false; // whether the page was searched for an inlined catalog

const base = (lang) => String(lang || "en").toLowerCase().split(/[-_]/)[0];

/** The page's language: <html lang>. */
export const pageLanguage = globalThis.document?.documentElement?.lang || "en";

/** A node's language: its own `lang`, else its nearest ancestor's (the page's <html lang>), else null. */
export function languageOf(node) { return node.closest("[lang]")?.getAttribute("lang") || null; }

/** `url` asking the server for its own sentences (errors, busy reasons, statuses) in `lang`: `?lang=` (explainer/words.py). */
export function withLanguage(url, lang) {
  if (!lang) return url;
  const u = new URL(url, globalThis.location?.href);
  u.searchParams.set("lang", lang);
  return u.href;
}

/** The language strings and numbers are in right now: the rendering element's, else the page's. */
export function language() { return current ?? pageLanguage; }

/** The catalog for `lang`: the page's own (window.django, or a saved page's inlined #he-catalog) when it is the
 *  page's language, else one loaded. */
function catalogFor(lang) {
  if (base(lang) === base(pageLanguage) && globalThis.django?.gettext) return globalThis.django;
  if (base(lang) === base(pageLanguage) && !lookedInline) inlined();
  return loaded.get(base(lang)) ?? null;
}

/** A page saved as a file (embed_static.html) carries its language's catalog inline: <script id="he-catalog">. */
function inlined() {
  lookedInline = true;
  const node = globalThis.document?.getElementById("he-catalog");
  if (!node) return;
  try { loaded.set(base(pageLanguage), jsonCatalog(base(pageLanguage), JSON.parse(node.textContent))); } catch { /* English */ }
}

/** The string in the current language. */
export function gettext(text) {
  const catalog = catalogFor(language());
  return catalog ? catalog.gettext(text) : text;
}

/** The form of `one`/`many` that agrees with `n`, in the current language (placeholders are filled by `fill`). */
export function ngettext(one, many, n) {
  const catalog = catalogFor(language());
  return catalog ? catalog.ngettext(one, many, n) : Number(n) === 1 ? one : many;
}

/** Marks a string for translation where it is defined (a module constant); translate it with gettext where used. */
export function gettext_noop(text) { return text; }

/** `%(name)s` placeholders of an already translated string filled from `values`. */
export function fill(text, values) {
  return text.replace(/%\((\w+)\)s/g, (_, name) => String(values[name] ?? ""));
}

/** Translated sentences as one paragraph: a space between them, none after a full-width stop (Chinese "。"). */
export function sentences(parts) {
  return parts.reduce((text, part, i) => (i === 0 ? String(part) : `${text}${/[。！？；：，）」]$/u.test(text) ? "" : " "}${part}`), "");
}

/** Runs `draw` with strings and numbers in `lang` (a diagram's own language); returns what `draw` returns. */
export function inLanguage(lang, draw) {
  const before = current;
  current = lang || null;
  try { return draw(); } finally { current = before; }
}

/** Whether strings in `lang` can be shown now (English always; another language once its catalog is in). */
export function hasLanguage(lang) { return base(lang) === "en" || catalogFor(lang) != null; }

/** Fetches `lang`'s JSON catalog from `origin` once (for an element's `lang=` on another site's page). */
export function loadCatalog(origin, lang) {
  const key = base(lang);
  if (key === "en" || catalogFor(lang)) return Promise.resolve(true);
  return (loading[key] ??= fetch(new URL(`/jsi18n.json?lang=${encodeURIComponent(lang)}`, origin))
    .then((response) => (response.ok ? response.json() : Promise.reject(new Error(`${response.status}`))))
    .then((json) => { loaded.set(key, jsonCatalog(key, json)); return true; })
    .catch((err) => { console.warn(`Hit Enter: no "${lang}" catalog, showing English`, err); return false; }));
}

/** gettext/ngettext over Django's JSONCatalog answer; plural forms chosen with Intl.PluralRules (no eval). */
function jsonCatalog(lang, { catalog = {} }) {
  const rules = new Intl.PluralRules(lang);
  const pick = (forms, n) => (forms.length === 1 ? forms[0] : forms[rules.select(Number(n)) === "one" ? 0 : 1]);
  return {
    gettext: (text) => { const v = catalog[text]; return typeof v === "string" ? v : Array.isArray(v) ? v[0] : text; },
    ngettext: (one, many, n) => { const v = catalog[one]; return Array.isArray(v) ? pick(v, n) : Number(n) === 1 ? one : many; },
  };
}

// ---- numbers in the current language (Intl.NumberFormat): "1,234.5" in English, "1 234,5" in French ----------

const formats = new Map();
function formatter(options) {
  const key = `${language()}|${JSON.stringify(options)}`;
  if (!formats.has(key)) formats.set(key, new Intl.NumberFormat(language(), options));
  return formats.get(key);
}

/** `x` with exactly `digits` decimals and no grouping, in the current language: toFixed's digits, except at a tie,
 * which Intl rounds on x's shortest decimal, half away from zero (6.685 reads 6.69; toFixed writes 6.68). */
export function decimal(x, digits = 0) {
  const n = Number(x);
  if (!Number.isFinite(n)) return String(x);
  return formatter({ minimumFractionDigits: digits, maximumFractionDigits: digits, useGrouping: false }).format(n + 0);
}

/** `x` with thousands grouping and at most `digits` decimals: "1,234,567" (toLocaleString), in the current language. */
export function grouped(x, digits = 0) {
  const n = Number(x);
  if (!Number.isFinite(n)) return String(x);
  return formatter({ maximumFractionDigits: digits }).format(n + 0);
}
