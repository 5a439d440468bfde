"""What a language costs (issue 28 point 4), on SmolLM2-135M-Instruct, the model `make run` serves: the same meaning
in six languages read by its own tokenizer. Each line's tokens decode back to the line; a character whose UTF-8
bytes are split over tokens is counted where a token's piece alone is not whole text; the KV bytes are the
config's bytes per token times the tokens; the prefill is timed over exactly the line's tokens."""
from inference.kvstats import kv_formula
from inference.languages import SENTENCES, Line, language_costs, language_prefills, line_cost


def test_each_language_costs_what_its_tokens_say(smollm2):
    costs = language_costs(smollm2, SENTENCES)
    rows = {row["lang"]: row for row in costs["rows"]}
    assert list(rows) == ["en", "fr", "es", "zh", "ja", "ar"] and costs["first"] == "English"
    per_token = kv_formula(smollm2.model.config, "float32")["bytes_per_token"]
    assert costs["kv_bytes_per_token"] == per_token == 2 * 30 * 3 * 64 * 4
    for line in SENTENCES:
        row = rows[line.lang]
        assert smollm2.tokenizer.decode(row["ids"]) == line.text  # nothing lost on the way in
        assert row["tokens"] == len(row["ids"]) == len(row["pieces"]) and row["kv_bytes"] == per_token * row["tokens"]
        assert row["chars_per_token"] == round(len(line.text) / row["tokens"], 3)
        assert row["partial"] == [n for n, piece in enumerate(row["pieces"]) if "\ufffd" in piece]
        assert row["tokens_vs_first"] == round(row["tokens"] / rows["en"]["tokens"], 3)
    assert rows["en"]["partial_tokens"] == 0 and rows["fr"]["partial_tokens"] == 0  # é is one token's whole text here
    for lang in ("zh", "ja", "ar"):  # a mostly English vocabulary splits these characters' bytes
        assert rows[lang]["partial_tokens"] > 0 and rows[lang]["tokens"] > rows["en"]["tokens"]


def test_a_visitors_own_line_and_an_empty_tokenization(smollm2):
    mine = line_cost(smollm2.tokenizer, "naïve café")
    assert smollm2.tokenizer.decode(mine["ids"]) == "naïve café" and mine["chars"] == 10 and mine["utf8_bytes"] == 12


def test_each_lines_prefill_is_timed_over_its_own_tokens(bundled):
    lines = [Line("en", "English", "a dog"), Line("en", "Longer", "a dog " * 20)]
    timed = language_prefills(bundled, lines)
    assert timed["repeats"] == 3 and all(row["prefill_ms"] > 0 for row in timed["rows"])
    assert timed["rows"][0]["prefill_vs_first"] == 1.0
