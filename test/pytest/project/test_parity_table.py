"""The nvFuser parity table (docs/parity.md, linked from the README) is kept honest by this test.

Each row names one piece of nvFuser's Python frontend (`fd.ops.cumsum`, `fd.define_vector`,
`Tensor.__abs__`, `DataType.ComplexFloat`, ...), fuser's status and the test files that
exercise it. A row marked `yes` must exist in fuser's frontend, and each test file it names
must exist and mention the name (or, for an elementwise op, loop over every member of its
kind enum, as test_lowering_ops.py does). A row marked `no` must NOT exist, so the table is
updated when it lands. Every `fd.ops` method fuser has must have a row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuser import DataType, FusionDefinition, Scalar, Tensor
from fuser_dialect.ops_compute import BinaryKind, UnaryKind

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "docs" / "parity.md"
BEGIN, END = "<!-- nvfuser-parity:begin -->", "<!-- nvfuser-parity:end -->"
ROW = re.compile(r"^\|\s*`(?P<api>[^`]+)`\s*\|\s*(?P<status>yes|no)\b[^|]*\|\s*(?P<tests>[^|]*)\|\s*$")


def _rows() -> list[dict[str, str]]:
    text = TABLE.read_text()
    assert BEGIN in text and END in text, f"docs/parity.md lacks the parity table markers {BEGIN} / {END}"
    table = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    rows = []
    for line in table.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        match = ROW.match(line)
        if match is None:
            assert line.startswith("| nvFuser"), f"unparsable parity row: {line}"
            continue
        rows.append(match.groupdict())
    return rows


ROWS = _rows()


def _owner(api: str) -> tuple[object, str]:
    """The object whose attribute `api` names, and that attribute."""
    fd = FusionDefinition()
    owners = {"fd.ops": fd.ops, "fd": fd, "Tensor": Tensor, "Scalar": Scalar, "DataType": DataType}
    prefix, _, name = api.rpartition(".")
    if prefix not in owners:
        raise AssertionError(f"parity row `{api}`: unknown owner {prefix!r} (one of {sorted(owners)})")
    return owners[prefix], name.split("(")[0]


def _leaf(api: str) -> str:
    return api.rpartition(".")[2].split("(")[0].strip("_")


_KIND_LOOPS = {kind: re.compile(rf"\bin\s+{kind.__name__}\b") for kind in (UnaryKind, BinaryKind)}


_OPERATORS = {
    "__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__rtruediv__": "/", "__neg__": "-",
    "__abs__": "abs(", "__pow__": "**", "__mod__": "%", "__and__": "&", "__or__": "|", "__xor__": "^",
    "__invert__": "~", "__lshift__": "<<", "__rshift__": ">>",
}
"""The Python operator each Tensor/Scalar dunder row is exercised by."""


def _covers(text: str, api: str) -> bool:
    """Whether a test file's text exercises `api`: by name, by its Python operator (a dunder),
    or by looping over its kind enum (an elementwise op)."""
    leaf = _leaf(api)
    if re.search(rf"\b{re.escape(leaf)}\b", text):
        return True
    dunder = api.rpartition(".")[2]
    if dunder in _OPERATORS:
        return _OPERATORS[dunder] in text
    return api.startswith("fd.ops.") and any(
        leaf in {str(k) for k in kind} and loop.search(text) for kind, loop in _KIND_LOOPS.items())


@pytest.mark.parametrize("row", ROWS, ids=[r["api"] for r in ROWS])
def test_row_matches_the_frontend(row):
    owner, name = _owner(row["api"])
    present = hasattr(owner, name)
    if row["status"] == "yes":
        assert present, f"docs/parity.md says `{row['api']}` is supported, but fuser has no {name!r}"
        files = [f.strip() for f in row["tests"].split(",") if f.strip()]
        assert files, f"docs/parity.md row `{row['api']}` names no test file"
        for f in files:
            path = ROOT / "test" / f
            assert path.is_file(), f"docs/parity.md row `{row['api']}`: test file test/{f} does not exist"
            assert _covers(path.read_text(), row["api"]), (
                f"docs/parity.md row `{row['api']}`: test/{f} never mentions {_leaf(row['api'])!r}")
    else:
        assert not present, f"docs/parity.md says `{row['api']}` is missing, but fuser has {name!r}: update the table"


def test_every_frontend_op_has_a_row():
    fd = FusionDefinition()
    listed = {_owner(r["api"])[1] for r in ROWS if r["api"].startswith("fd.ops.")}
    ops = {n for n in dir(fd.ops) if not n.startswith("_") and callable(getattr(fd.ops, n))}
    assert sorted(ops - listed) == [], "fd.ops methods missing from the parity table in docs/parity.md"
