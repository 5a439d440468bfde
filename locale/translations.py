"""The site's words in each language (issue 28): locale/strings/<lang>.json, written into
locale/<lang>/LC_MESSAGES/*.po by `python locale/translations.py` (then `manage.py compilemessages`). Only the
site's own words: never model text."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def translations(lang: str) -> dict[str, str]:
    """locale/strings/<lang>.json: English msgid -> this language's string (HTML tags and %(name)s kept as they are)."""
    return json.loads((HERE / "strings" / f"{lang}.json").read_text(encoding="utf-8"))


LANGS = ("fr", "es", "zh_Hans")
PLURAL = {"fr": "nplurals=2; plural=(n > 1);", "es": "nplurals=2; plural=(n != 1);", "zh_Hans": "nplurals=1; plural=0;"}


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def unquote(parts: list[str]) -> str:
    """One msgid/msgstr's text from its quoted lines."""
    text = "".join(re.findall(r'^"(.*)"$', part)[0] for part in parts)
    return re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), text)


def msgids(po: Path) -> list[tuple[str, str | None]]:
    """The (msgid, msgid_plural or None) pairs makemessages wrote (the marked strings of the source), in its order."""
    out, field, parts, entry = [], None, [], {}

    def close():
        if field in ("msgid", "msgid_plural"):
            entry[field] = unquote(parts)

    for line in po.read_text(encoding="utf-8").splitlines() + [""]:
        starts = re.match(r"^(msgid_plural|msgid|msgstr(?:\[\d+\])?) ", line)
        if starts or not line.startswith('"'):
            close()
            field, parts = None, []
        if starts:
            if starts.group(1) == "msgid":
                if entry.get("msgid"):
                    out.append((entry["msgid"], entry.get("msgid_plural")))
                entry = {}
            field, parts = starts.group(1), [line[len(starts.group(0)):]]
        elif line.startswith('"') and field:
            parts.append(line)
    if entry.get("msgid"):
        out.append((entry["msgid"], entry.get("msgid_plural")))
    return out


def plural_count(lang: str) -> int:
    """How many plural forms `lang` has (its Plural-Forms header)."""
    return int(re.search(r"nplurals=(\d+)", PLURAL[lang]).group(1))


def forms_of(value, lang: str) -> list[str] | None:
    """A plural entry's forms from strings/<lang>.json (a list, one per plural form of the language), else None."""
    return value if isinstance(value, list) and len(value) == plural_count(lang) and all(value) else None


def write(lang: str, domain: str) -> list[str]:
    """Rewrite one .po with every marked string translated; returns those still without a translation."""
    po = HERE / lang / "LC_MESSAGES" / f"{domain}.po"
    ids, known = msgids(po), translations(lang)
    head = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"', f'"Language: {lang}\\n"',
            f'"Plural-Forms: {PLURAL[lang]}\\n"', ""]
    body, missing = [], []
    for one, many in ids:
        value = known.get(one)
        if many is None:
            missing += [] if isinstance(value, str) and value else [one]
            body += [f"msgid {quote(one)}", f"msgstr {quote(value if isinstance(value, str) else '')}", ""]
            continue
        forms = forms_of(value, lang)
        missing += [] if forms else [one]
        body += [f"msgid {quote(one)}", f"msgid_plural {quote(many)}"]
        body += [f"msgstr[{i}] {quote(form)}" for i, form in enumerate(forms or [""] * plural_count(lang))] + [""]
    po.write_text("\n".join(head + body), encoding="utf-8")
    return missing


if __name__ == "__main__":
    left = {f"{lang}/{domain}": write(lang, domain) for lang in LANGS for domain in ("django", "djangojs")}
    left = {k: v for k, v in left.items() if v}
    if left:
        print("untranslated:", left, file=sys.stderr)
        sys.exit(1)
