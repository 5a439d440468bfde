"""docs/protocol.md and inference/wire/schema.py stay in step."""
from pathlib import Path

from inference.wire.schema import SCHEMA, field_paths, schema_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_generated_tables_are_in_the_doc():
    assert schema_markdown() in DOC.read_text(), "run: python -m inference schema, and paste it into docs/protocol.md"


def test_every_field_is_documented():
    text = DOC.read_text()
    for kind, spec in SCHEMA.items():
        for path, _, _ in field_paths(spec):
            assert f"`{path}`" in text, f"{kind}.{path} is not documented"
