"""Read WordNet 3.0's database files (Debian's ``wordnet-base``) into plain Python objects.

The format is documented in ``wndb(5WN)``: one synset per line,
``offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptr... | gloss``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

WORDNET_DIR = Path("/usr/share/wordnet")
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_QUOTED = re.compile(r'"([^"]+)"')


@dataclass
class Synset:
    key: str  # "n:04693804": part of speech and byte offset
    pos: str
    lemmas: list[str]
    definition: str
    examples: list[str]
    hypernyms: list[str] = field(default_factory=list)
    hyponyms: list[str] = field(default_factory=list)


def _split_gloss(gloss: str) -> tuple[str, list[str]]:
    """A gloss is 'definition; "example one"; "example two"'."""
    examples = _QUOTED.findall(gloss)
    definition = _QUOTED.sub("", gloss).strip(" ;").split(";")[0].strip()
    return definition, [e.strip() for e in examples if len(e.split()) >= 3]


def _parse_line(line: str, pos: str) -> Synset:
    head, _, gloss = line.partition(" | ")
    parts = head.split()
    offset, word_count = parts[0], int(parts[3], 16)
    lemmas = [re.sub(r"\(.*\)$", "", parts[4 + 2 * i]).replace("_", " ") for i in range(word_count)]
    i = 4 + 2 * word_count
    pointer_count = int(parts[i])
    hypernyms, hyponyms = [], []
    for p in range(pointer_count):
        symbol, target, target_pos = parts[i + 1 + 4 * p: i + 4 + 4 * p]
        target_pos = "a" if target_pos == "s" else target_pos
        if symbol in ("@", "@i"):
            hypernyms.append(f"{target_pos}:{target}")
        elif symbol in ("~", "~i"):
            hyponyms.append(f"{target_pos}:{target}")
    definition, examples = _split_gloss(gloss.strip())
    return Synset(f"{pos}:{offset}", pos, lemmas, definition, examples, hypernyms, hyponyms)


def load_synsets(root: Path = WORDNET_DIR) -> dict[str, Synset]:
    synsets: dict[str, Synset] = {}
    for pos, name in POS_FILES.items():
        with open(root / f"data.{name}", encoding="latin-1") as f:
            for line in f:
                if not line.startswith("  "):  # licence header lines start with two spaces
                    s = _parse_line(line, pos)
                    synsets[s.key] = s
    return synsets


def load_sense_index(root: Path = WORDNET_DIR) -> dict[str, list[str]]:
    """Word -> synset keys, most frequent sense first (the order of index.POS), nouns first."""
    senses: dict[str, list[str]] = {}
    for pos, name in POS_FILES.items():
        with open(root / f"index.{name}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                parts = line.split()
                synset_count = int(parts[2])
                offsets = parts[-synset_count:]
                word = parts[0].replace("_", " ")
                senses.setdefault(word, []).extend(f"{pos}:{o}" for o in offsets)
    return senses


def hyponym_closure(synsets: dict[str, Synset], roots: list[str]) -> list[Synset]:
    """Every synset below the given ones (roots included), in a stable order."""
    seen, stack, out = set(), list(roots), []
    while stack:
        key = stack.pop()
        if key in seen or key not in synsets:
            continue
        seen.add(key)
        out.append(synsets[key])
        stack.extend(synsets[key].hyponyms)
    return sorted(out, key=lambda s: s.key)


def find_synset(synsets: dict[str, Synset], senses: dict[str, list[str]], word: str, must_contain: str) -> str:
    """The key of the sense of ``word`` whose definition mentions ``must_contain``."""
    for key in senses.get(word, []):
        if must_contain in synsets[key].definition:
            return key
    raise KeyError(f"no sense of {word!r} mentions {must_contain!r}")
