// Number agreement for the prose the page builds: "1 step", "2 steps", "1,000,000 tokens".

/** The noun that agrees with `n`: noun(1, "step") is "step", noun(2, "step") is "steps". */
export function noun(n, one, many = `${one}s`) { return Number(n) === 1 ? one : many; }

/** `n` with thousands separators and the noun that agrees with it: plural(1, "step") is "1 step". */
export function plural(n, one, many = `${one}s`) {
  if (n == null || !Number.isFinite(Number(n))) return `– ${many}`;
  return `${Number(n).toLocaleString("en-US")} ${noun(n, one, many)}`;
}
