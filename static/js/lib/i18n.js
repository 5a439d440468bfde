// The site's own words in the page's language (issue 28): Django's JavaScript catalog (/jsi18n/, loaded by
// base.html before the modules) defines window.django; without it (a static copy of static/, an author's page)
// the English is shown. Model text never goes through here. Strings are marked with gettext(…) by that name:
// `manage.py makemessages -d djangojs` finds them.
const catalog = globalThis.django;

/** The string in the page's language. */
export function gettext(text) {
  return catalog?.gettext ? catalog.gettext(text) : text;
}

/** `%(name)s` placeholders of an already translated string filled from `values`. */
export function fill(text, values) {
  return text.replace(/%\((\w+)\)s/g, (_, name) => String(values[name] ?? ""));
}

/** The page's language for numbers and dates (Intl): <html lang>. */
export const pageLanguage = document.documentElement.lang || "en";

