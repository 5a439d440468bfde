// Number agreement for English-only prose: "1 step", "2 steps", "1,000,000 tokens". Words a reader sees in
// another language use ngettext (lib/i18n.js) instead.
import { grouped } from "./i18n.js";

/** The noun that agrees with `n`: noun(1, "step") is "step", noun(2, "step") is "steps". */
export function noun(n, one, many = `${one}s`) { return Number(n) === 1 ? one : many; }

/** `n` with thousands separators and the noun that agrees with it: plural(1, "step") is "1 step". */
export function plural(n, one, many = `${one}s`) {
  if (n == null || !Number.isFinite(Number(n))) return `– ${many}`;
  return `${grouped(n)} ${noun(n, one, many)}`;
}
