"""Turn WordNet glosses and examples into chat exchanges for the bundled model.

Every answer is built from WordNet's own text, so the model behaves like a tiny dictionary
that chats. Words are split into train and held-out sets by a stable hash, so validation can
ask about words the model never saw.
"""
from __future__ import annotations

import hashlib
import random

from .wordnet import Synset, find_synset, hyponym_closure, load_sense_index, load_synsets

ARTICLE_PROMPT = "The mole on my face may need a biopsy. Explain this simply."
SYSTEM_PROMPTS = ["You are a tiny dictionary.", "Answer simply.", "You explain words in plain language."]
# Roots of the WordNet trees that article-shaped prompts draw from (see ``wordnet.find_synset``).
SPOT_ROOTS = [("blemish", "mark"), ("lesion", "localized"), ("skin disease", "skin"), ("tumor", "mass"), ("rash", "red")]
PROCEDURE_ROOTS = [("medical procedure", "procedure"), ("biopsy", "tissues"), ("surgical procedure", "incision")]
BODY_ROOTS = [("external body part", "visible")]
POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


def is_held_out(word: str, fraction: float = 0.03) -> bool:
    digest = hashlib.sha256(word.lower().encode()).digest()
    return digest[0] / 256 < fraction


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def sentence(text: str) -> str:
    text = capital(text.strip())
    return text if text.endswith((".", "!", "?")) else text + "."


def define(word: str, s: Synset) -> str:
    if s.pos == "n":
        return sentence(f"{article(word)} {word} is {s.definition}")
    if s.pos == "v":
        return sentence(f"to {word} means to {s.definition}")
    return sentence(f"{word} means {s.definition}")


def word_exchanges(word: str, keys: list[str], synsets: dict[str, Synset], rng: random.Random) -> list[tuple[str, str]]:
    """Questions about one word, answered from its senses (most frequent first)."""
    senses = [synsets[k] for k in keys if k in synsets][:4]
    first = senses[0]
    if word not in [w.lower() for w in first.lemmas] or word not in first.lemmas:
        return []  # a proper noun (WordNet spells it capitalised): no "a william rehnquist is"
    out = [(rng.choice([f"What does {word} mean?", f"What is the meaning of {word}?", f"Define {word}."]),
            define(word, first) if len(senses) == 1 else
            f"{capital(word)} can mean more than one thing. " + " ".join(
                f"As a {POS_NAMES[s.pos]}, {s.definition}." for s in senses))]
    example = f" For example: \"{first.examples[0]}\"" if first.examples else ""
    out.append((rng.choice([f"Explain {word} simply.", f"Explain {word} in simple words.", f"Tell me about {word}."]),
                define(word, first) + example))
    if first.pos == "n":
        out.append((f"What is {article(word)} {word}?", define(word, first)))
    return out


def context_exchanges(synsets: dict[str, Synset], rng: random.Random) -> list[tuple[str, str]]:
    """WordNet's example sentences, each asked about in context: the sense is the one glossed."""
    out = []
    for s in synsets.values():
        for example in s.examples:
            used = [w for w in s.lemmas if f" {w} " in f" {example} " and not is_held_out(w)]
            if used:
                ask = rng.choice(["Explain this simply.", "What does this mean?", "Explain this."])
                out.append((f"{sentence(example)} {ask}", f"Here, {define(used[0], s)[0].lower()}{define(used[0], s)[1:]}"))
    return out


def _pool(synsets, senses, roots) -> list[tuple[str, Synset]]:
    keys = [find_synset(synsets, senses, word, hint) for word, hint in roots]
    return [(w, s) for s in hyponym_closure(synsets, keys) for w in s.lemmas[:2]
            if len(w.split()) <= 2 and w.islower() and not is_held_out(w)]


def article_shaped_exchanges(synsets, senses, rng: random.Random, count: int) -> list[tuple[str, str]]:
    """Prompts shaped like the article's: a spot on a body part that may need a procedure."""
    spots, procedures = _pool(synsets, senses, SPOT_ROOTS), _pool(synsets, senses, PROCEDURE_ROOTS)
    parts = _pool(synsets, senses, BODY_ROOTS)
    shapes = ["The {spot} on my {part} may need {a_proc} {proc}. Explain this simply.",
              "My doctor says the {spot} on my {part} needs {a_proc} {proc}. What does that mean?",
              "I have {a_spot} {spot} on my {part}. Will I need {a_proc} {proc}? Explain simply."]
    out = []
    while len(out) < count:
        (spot, s1), (part, _), (proc, s2) = rng.choice(spots), rng.choice(parts), rng.choice(procedures)
        prompt = rng.choice(shapes).format(spot=spot, part=part, proc=proc, a_proc=article(proc), a_spot=article(spot))
        if prompt == ARTICLE_PROMPT:
            continue  # the article's own prompt stays out of training: it is the evaluation
        answer = (f"{define(spot, s1)} {define(proc, s2)} "
                  f"So a doctor may look at the {spot} on your {part} with {article(proc)} {proc}.")
        out.append((prompt, answer))
    return out


def build_exchanges(seed: int = 0) -> tuple[list[list[dict]], list[list[dict]], list[str]]:
    """Return (train conversations, validation conversations, held-out words)."""
    rng = random.Random(seed)
    synsets, senses = load_synsets(), load_sense_index()
    train, valid, held_out = [], [], []
    for word in sorted(senses):
        if not word.replace(" ", "").replace("-", "").isalpha() or len(word.split()) > 3:
            continue
        pairs = word_exchanges(word, senses[word], synsets, rng)
        if is_held_out(word):
            held_out.append(word)
            valid.extend(pairs)
        else:
            train.extend(pairs)
    train.extend(context_exchanges(synsets, rng))
    train.extend(article_shaped_exchanges(synsets, senses, rng, count=40000))
    rng.shuffle(train)
    split = len(train) // 100  # 1% of seen-word exchanges also go to validation
    valid.extend(train[:split])
    return [to_messages(p, rng) for p in train[split:]], [to_messages(p, rng) for p in valid], held_out


def to_messages(pair: tuple[str, str], rng: random.Random) -> list[dict]:
    messages = [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
    if rng.random() < 0.1:
        messages.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    return messages
