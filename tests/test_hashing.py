"""Asset ids equal to the reference implementation's (EvoMap/evolver src/gep/contentHash.js).

Hand-computed vectors always run. The differential test runs the reference's own canonicalization under
node when ``GEP_REF_CONTENTHASH`` points to a copy of contentHash.js (never committed here) and ``node``
is installed; it is skipped otherwise.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gep.core.hashing import canonical_json, compute_asset_id, js_dumps, js_number, js_string, verify_asset_id

FIXTURES = Path(__file__).parent / "fixtures" / "reference_assets"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------ hand-computed vectors


@pytest.mark.parametrize(("value", "expected"), [
    (1.0, "1"), (1, "1"), (1e21, "1e+21"), (1e-7, "1e-7"), (0.1 + 0.2, "0.30000000000000004"),
    (-0.0, "0"), (0.0, "0"), (123456789012345680000, "123456789012345680000"),
    (1.2345678901234568e20, "123456789012345680000"), (1e20, "100000000000000000000"),
    (1e-6, "0.000001"), (1.5e-6, "0.0000015"), (-1.5e-7, "-1.5e-7"), (2.5, "2.5"), (-42, "-42"),
    (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"), (123.456, "123.456"),
    (2**53 + 1, "9007199254740992"),  # a JSON integer is a double in JavaScript
    (12345678901234567890, "12345678901234567000"), (1e16, "10000000000000000"),
    (1.5e300, "1.5e+300"), (100.0, "100"), (0.001, "0.001"),
    (math.nan, "null"), (math.inf, "null"), (-math.inf, "null"), (10**400, "null"),
])
def test_numbers_are_written_as_javascript_writes_them(value: float, expected: str) -> None:
    assert js_number(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("plain", '"plain"'),
    ('q"b\\s/', '"q\\"b\\\\s/"'),
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\x00\x01\x1f\x7f", '"\\u0000\\u0001\\u001f\x7f"'),  # DEL is not escaped
    ("é中😀\u2028\u2029", '"é中😀\u2028\u2029"'),  # non-ASCII and line separators stay raw
    ("\ud800", '"\\ud800"'), ("a\udfffb", '"a\\udfffb"'),  # lone surrogates: escaped, lower-case hex
    ("\ud83d\ude00", '"😀"'),  # a pair held as two code points is one character in UTF-16
    ("\udbff\ud800", '"\\udbff\\ud800"'),  # high then high: both lone
])
def test_strings_are_written_as_json_stringify_writes_them(value: str, expected: str) -> None:
    assert js_string(value) == expected


def test_canonical_json_sorts_keys_by_utf16_code_units_at_every_level() -> None:
    # Python's sorted() puts U+E000 before U+1F600; JavaScript compares UTF-16 units (0xD83D < 0xE000).
    value = {"\ue000": 1, "😀": 2, "a": 3, "B": 4, "nested": {"z": [1.0, {"b": None, "a": True}], "Z": False}}
    assert canonical_json(value) == (
        '{"B":4,"a":3,"nested":{"Z":false,"z":[1,{"a":true,"b":null}]},"😀":2,"\ue000":1}')


def test_compute_asset_id_hand_vectors() -> None:
    assert compute_asset_id({}) == sha("{}") == (
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
    obj = {"type": "Gene", "id": "g1", "score": 1.0, "big": 1e21, "tiny": 1e-7, "neg0": -0.0, "none": None}
    expected_canon = '{"big":1e+21,"id":"g1","neg0":0,"none":null,"score":1,"tiny":1e-7,"type":"Gene"}'
    assert canonical_json(obj) == expected_canon
    assert compute_asset_id(obj) == sha(expected_canon)
    # the id ignores its own asset_id field, and only at the top level
    assert compute_asset_id({**obj, "asset_id": "sha256:whatever"}) == compute_asset_id(obj)
    assert compute_asset_id({"x": {"asset_id": 1}}) == sha('{"x":{"asset_id":1}}')


def test_top_level_proto_key_is_ignored_like_the_reference() -> None:
    # The reference copies keys into a plain JS object; assigning "__proto__" sets the prototype instead.
    assert compute_asset_id({"a": 1, "__proto__": {"x": 1}}) == compute_asset_id({"a": 1})
    assert compute_asset_id({"a": {"__proto__": 1}}) == sha('{"a":{"__proto__":1}}')


def test_non_json_values_are_refused() -> None:
    with pytest.raises(TypeError):
        compute_asset_id({"when": object()})
    with pytest.raises(TypeError):
        compute_asset_id({1: "int key"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        compute_asset_id(["not", "an", "object"])  # type: ignore[arg-type]


def test_verify_asset_id() -> None:
    obj = {"type": "Capsule", "id": "c1", "summary": "s"}
    assert not verify_asset_id(obj)  # no id claimed
    stamped = {**obj, "asset_id": compute_asset_id(obj)}
    assert verify_asset_id(stamped)
    assert not verify_asset_id({**stamped, "summary": "changed"})
    assert not verify_asset_id({**obj, "asset_id": ""})


def test_ids_written_by_the_reference_verify() -> None:
    """Real asset ids from the reference's assets/gep/genes.seed.json and solidify-shaped events/capsules."""
    genes = json.loads((FIXTURES / "genes.json").read_text(encoding="utf-8"))["genes"]
    with_ids = [g for g in genes if "asset_id" in g]
    assert {g["id"] for g in with_ids} == {"gene_distilled_s2g-env-vars", "gene_publish_feishu_doc"}
    assert all(verify_asset_id(g) for g in with_ids)
    assert compute_asset_id(with_ids[0]) == (
        "sha256:1501bc37fbefb18630c4dc8a95d8cdc1ed32bec4a465dc3223280ae907e07297")
    lines = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(verify_asset_id(json.loads(line)) for line in lines)


def test_js_dumps_writes_files_byte_for_byte_like_json_stringify() -> None:
    for name in ("capsules.json", "failed_capsules.json", "genes.json"):
        raw = (FIXTURES / name).read_text(encoding="utf-8")
        assert js_dumps(json.loads(raw), indent=2) + "\n" == raw
    for line in (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines():
        assert js_dumps(json.loads(line)) == line
    assert js_dumps({"a": [], "b": {}, "c": [1, {"d": None}]}, indent=2) == (
        '{\n  "a": [],\n  "b": {},\n  "c": [\n    1,\n    {\n      "d": null\n    }\n  ]\n}')


# ------------------------------------------------------------------ differential test against the reference

_TRICKY_CHARS = ["\ud800", "\udbff", "\udc00", "\udfff", "\ue000", "\uffff", "😀", "𝄞", "\x00", "\x1f", "\x7f",
                 '"', "\\", "\u2028", "é", "中", "a", "A", "_", " ", "\n", "/"]
_chars = st.one_of(st.sampled_from(_TRICKY_CHARS), st.characters(codec=None, exclude_categories=()))
_text = st.text(_chars, max_size=12)
_numbers = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1 + 0.2, 1e21, 1e-7, 1e-6, 5e-324, -0.0, 2**53, 1.5, 123456789012345680000.0]),
)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), _numbers, _text),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_text, inner, max_size=5)),
    max_leaves=25,
)
_objects = st.dictionaries(st.one_of(_text, st.sampled_from(["asset_id", "__proto__", "id", "type"])), _json,
                           max_size=8)

_HARNESS = r"""
const h = require(process.env.GEP_REF_CONTENTHASH);
const rl = require('readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const v = JSON.parse(line);
  process.stdout.write(JSON.stringify({ canon: h.canonicalize(v), id: h.computeAssetId(v) }) + '\n');
});
"""


class _Node:
    def __init__(self, harness: Path):
        self.proc = subprocess.Popen(["node", str(harness)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, encoding="utf-8")

    def ask(self, value: object) -> dict[str, str]:
        assert self.proc.stdin and self.proc.stdout
        # ensure_ascii: lone surrogates and astral characters travel as \u escapes JSON.parse understands
        self.proc.stdin.write(json.dumps(value, ensure_ascii=True) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory):
    ref = os.environ.get("GEP_REF_CONTENTHASH")
    if not ref or not Path(ref).is_file() or shutil.which("node") is None:
        pytest.skip("set GEP_REF_CONTENTHASH to the reference's contentHash.js (and install node) to run")
    harness = tmp_path_factory.mktemp("node") / "harness.js"
    harness.write_text(_HARNESS, encoding="utf-8")
    node = _Node(harness)
    yield node
    node.close()


_EXAMPLES = int(os.environ.get("GEP_HASH_EXAMPLES", "500"))


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=_objects)
def test_asset_ids_equal_the_reference(reference: _Node, obj: dict) -> None:
    answer = reference.ask(obj)
    assert canonical_json(obj) == answer["canon"]
    assert compute_asset_id(obj) == answer["id"]


@settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_json)
def test_canonical_json_equals_the_reference(reference: _Node, value: object) -> None:
    assert canonical_json(value) == reference.ask(value)["canon"]
