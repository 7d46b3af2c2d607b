"""Errors a newcomer meets are one clear line that says what to write instead (issue 24):
a single array passed to `execute`, a `-1` dim meeting an extent-1 one at run time, a bad pass
option in `fuser-opt`, and `fuser-opt --help` listing fuser's own passes first."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fuser import DataType, FusionDefinition
from fuser_dialect.extents import ExtentError

LIT_INPUT = "test/passes/fuser-preseg.mlir"


def _add() -> FusionDefinition:
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, -1], dtype=DataType.Float)
        b = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, b))
    return fd


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_one_array_instead_of_a_list_says_to_pass_a_list(backend):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.exp(fd.define_tensor([-1, -1], dtype=DataType.Float)))
    with pytest.raises(TypeError, match=r"execute takes a list of inputs, one per define_tensor/define_scalar; "
                                        r"got one ndarray of shape \[4, 3\]: write execute\(\[x\]\)"):
        fd.execute(np.ones((4, 3), np.float32), backend=backend)


def test_an_extent_one_dim_declared_minus_one_says_how_to_broadcast():
    x, row = np.ones((4, 3), np.float32), np.ones((1, 3), np.float32)
    with pytest.raises(ExtentError, match=r"dim 0 has extents 4 and 1 at run time, which neither match nor "
                                          r"broadcast .*declare it 1 in define_tensor \(shape=\[\.\.\., 1, \.\.\.\]\)"):
        _add().execute([x, row], backend="cpu")
    with pytest.raises(ExtentError) as info:  # no hint where no extent is 1
        _add().execute([x, np.ones((2, 3), np.float32)], backend="cpu")
    assert "declare it 1" not in str(info.value)


def _fuser_opt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuser.tools.fuser_opt", *args], capture_output=True, text=True)


def test_a_bad_pass_option_names_the_pass_and_the_option():
    done = _fuser_opt(LIT_INPUT, "-p", "consecutive-cast,remove-bcast-squeeze{swap-unary=maybe}")
    assert done.returncode == 1
    assert done.stderr.strip() == ("fuser-opt: error: pass 'remove-bcast-squeeze': option 'swap-unary=maybe': "
                                   "Incompatible types: given ('maybe',), expected <class 'bool'>")


def test_help_lists_fusers_passes_first():
    done = _fuser_opt("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    ours = text.index("fuser's passes: ")
    assert ours < text.index("xDSL's passes (also accepted): ")
    listed = text[ours:text.index("xDSL's passes")]
    for name in ("fuser-preseg", "segment", "decompose-welford", "remove-broadcast-reduction", "concretize"):
        assert name in listed.replace("- ", "-")
