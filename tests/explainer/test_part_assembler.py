"""client.js's PartAssembler joins a head and its `part`s (docs/protocol.md, "Messages larger than the send cap"),
and a part whose path leaves the head's own strings and lists refuses its message (issue 22, N7), in node."""
import json
import shutil
import subprocess

import pytest

from tests.conftest import require
from tests.support import client_module


BAD_PATHS = [["__proto__", "toString"], ["constructor", "prototype", "toString"], ["toString"], ["hasOwnProperty"],
             ["prototype"], ["tokens", "length"], ["attention", "__proto__", "toString"], ["own_proto", "x"], [],
             "tokens", [0], ["attention", "blocks", "b64", "x"]]

NODE_DRIVER = """
const { PartAssembler } = await import(process.argv[2]);
const errors = [];
console.error = (text) => errors.push(String(text));
const head = () => JSON.parse('{"type": "prefill", "parts": 2, "tokens": [], "attention": {"blocks": {"b64": ""}},'
                              + ' "own_proto": {"__proto__": {"x": ""}}}');
const part = (index, pieces) => ({ type: "part", of: "prefill", index, count: 2, pieces });
const out = {};

const parts = new PartAssembler();
parts.take(head());
out.after_first = parts.take(part(1, [{ path: ["tokens"], items: ["a", "b"] }, { path: ["attention", "blocks", "b64"], text: "AA" }]));
out.joined = parts.take(part(2, [{ path: ["tokens"], items: ["c"] }, { path: ["attention", "blocks", "b64"], text: "BB" }]));

out.refused = [];
for (const path of JSON.parse(process.argv[3])) {
  const assembler = new PartAssembler();
  assembler.take(head());
  const answer = assembler.take(part(1, [{ path: ["tokens"], items: ["a"] }, { path, text: "pwned" }]));
  const rest = assembler.take(part(2, [{ path: ["tokens"], items: ["b"] }]));  // its head is gone: dropped
  const next = assembler.take({ type: "step", step: 1 });  // the socket goes on
  out.refused.push({ code: answer?.code, field: answer?.field, rest, next: next?.type });
}
out.to_string = String({});
out.prototype_keys = Object.getOwnPropertyNames(Object.prototype).filter((k) => typeof Object.prototype[k] !== "function"
                                                                          && k !== "__proto__");
out.errors = errors;
console.log(JSON.stringify(out));
"""


@pytest.fixture
def run_driver(tmp_path):
    node = require(shutil.which("node"), "node", "apt-get install nodejs")
    module = client_module(tmp_path)  # the same file, as an ES module node will import
    driver = tmp_path / "drive.mjs"
    driver.write_text(NODE_DRIVER)

    def run():
        out = subprocess.run([node, str(driver), module.as_uri(), json.dumps(BAD_PATHS)], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    return run


def test_a_head_and_its_parts_join_into_the_message(run_driver):
    out = run_driver()
    assert out["after_first"] is None
    assert out["joined"] == {"type": "prefill", "tokens": ["a", "b", "c"], "attention": {"blocks": {"b64": "AABB"}},
                             "own_proto": {"__proto__": {"x": ""}}}


def test_a_part_path_outside_the_heads_own_strings_and_lists_refuses_the_message(run_driver):
    out = run_driver()
    assert out["refused"] == [{"code": "bad_part_path", "field": "pieces", "rest": None, "next": "step"}] * len(BAD_PATHS)
    assert out["to_string"] == "[object Object]"
    assert out["prototype_keys"] == []  # nothing was added to Object.prototype, nothing replaced a method by a string
    assert len(out["errors"]) == len(BAD_PATHS) and all(e.startswith("hit-enter: bad_part_path: ") for e in out["errors"])
