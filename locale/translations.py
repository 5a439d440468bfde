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


def msgids(po: Path) -> list[str]:
    """The msgids makemessages wrote (the marked strings of the source), in its order."""
    out, current, reading = [], [], False
    for line in po.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("msgid "):
            current, reading = [line[6:]], True
        elif reading and line.startswith('"'):
            current.append(line)
        elif reading:
            reading = False
            text = "".join(re.findall(r'^"(.*)"$', part)[0] for part in current)
            text = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), text)
            if text:
                out.append(text)
    return out


def write(lang: str, domain: str) -> list[str]:
    """Rewrite one .po with every marked string translated; returns those still without a translation."""
    po = HERE / lang / "LC_MESSAGES" / f"{domain}.po"
    ids, known = msgids(po), translations(lang)
    missing = [m for m in ids if not known.get(m)]
    head = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"', f'"Language: {lang}\\n"',
            f'"Plural-Forms: {PLURAL[lang]}\\n"', ""]
    body = []
    for m in ids:
        body += [f"msgid {quote(m)}", f"msgstr {quote(known.get(m, ''))}", ""]
    po.write_text("\n".join(head + body), encoding="utf-8")
    return missing


if __name__ == "__main__":
    left = {f"{lang}/{domain}": write(lang, domain) for lang in LANGS for domain in ("django", "djangojs")}
    left = {k: v for k, v in left.items() if v}
    if left:
        print("untranslated:", left, file=sys.stderr)
        sys.exit(1)
