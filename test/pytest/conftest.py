"""Session-wide settings of the pytest suite (its folders: README.md beside this file).

* The shared helper modules (lowering_checks, torch_checks, nvfuser_ported, ...) live in this
  folder, the tests in its subfolders: this folder is put first on sys.path here, before any test
  module is imported, so `from lowering_checks import check` works from every subfolder (pytest's
  default "prepend" import mode only adds each test file's own folder). Test file names are
  unique across the folders (they are imported by their bare names).
* FUSER_MEMCHECK=1 (unless set): every cpu launch in the suite checks each global access against
  the buffer it goes through, so an out-of-bounds index fails the test that caused it instead of
  reading garbage. FUSER_MEMCHECK=0 runs the suite unchecked.
* FUSER_RACECHECK=0 (unless set): racecheck (lowering/runtime/fuser_cpu_racecheck.h) costs
  too much for every kernel of a CI run; backends/test_racecheck.py runs every scheduler's
  kernels with it. FUSER_RACECHECK=1 runs the whole suite with it: a race between the threads of
  a block fails the test that made the kernel.
* FUSER_CACHE_DIR and FUSER_SHARED_CACHE_DIR: a fresh folder per session (removed at its end),
  so the suite neither fills nor depends on the user's ~/.cache/fuser (the cpu runtime, its
  precompiled header and NVRTC's headers are built once per session); kernels are shared by all
  tests of a session. FUSER_TEST_CACHE_DIR=<folder> uses (and keeps) that folder instead, for a
  warm cache across runs.

* Parallel runs (pytest-xdist, on by default: `-n auto --dist loadgroup` in pyproject.toml;
  `-n 0` runs in one process): the xdist workers of a session are one session here. The
  controller makes the folder and names it to its workers (they inherit its environment, see
  _SESSION_CACHE_VAR); they share it, as processes sharing ~/.cache/fuser do (entries appear
  whole, by rename), and only the process that made it removes it. Everything else a test
  writes goes to its own tmp_path, and per-process state (settings, in-memory caches,
  monkeypatched variables) stays in its worker. Tests that must not run beside another test of
  their file are kept on one worker with `@pytest.mark.xdist_group(...)`.

* FUSER_TEST_BACKENDS=cuda,cpu: the kernel backends that tests comparing with the reference run
  on (lowering_checks.check, and every test taking the `kernel_backend` argument, once per
  backend). Default: cpu, plus cuda where a GPU is usable. A name that is unknown or not usable
  here stops the session at its start, with the reason.

Both caches and memcheck are set at import, before any test module can read a setting.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

_SUITE = str(Path(__file__).resolve().parent)
if _SUITE not in sys.path:
    sys.path.insert(0, _SUITE)

os.environ.setdefault("FUSER_MEMCHECK", "1")
os.environ.setdefault("FUSER_RACECHECK", "0")

# The session's cache folder, as the process that made it names it to the processes it starts
# (xdist's workers, a pytest run by a test): they use it and leave it in place.
_SESSION_CACHE_VAR = "FUSER_TEST_SESSION_CACHE_DIR"
_KEPT_CACHE = os.environ.get("FUSER_TEST_CACHE_DIR", "").strip()
_INHERITED_CACHE = os.environ.get(_SESSION_CACHE_VAR, "").strip()
if _INHERITED_CACHE and not os.path.isdir(_INHERITED_CACHE):
    _INHERITED_CACHE = ""
_SESSION_CACHE = _KEPT_CACHE or _INHERITED_CACHE or tempfile.mkdtemp(prefix="fuser-test-cache-")
_OWNS_CACHE = not (_KEPT_CACHE or _INHERITED_CACHE)
os.environ[_SESSION_CACHE_VAR] = _SESSION_CACHE
os.environ["FUSER_CACHE_DIR"] = _SESSION_CACHE
os.environ["FUSER_SHARED_CACHE_DIR"] = os.path.join(_SESSION_CACHE, "shared")


def pytest_configure(config):
    from lowering_checks import KERNEL_BACKENDS, backends_under_test

    from fuser.lowering.backends import get_backend

    for name in backends_under_test():
        if name not in KERNEL_BACKENDS:
            raise pytest.UsageError(f"FUSER_TEST_BACKENDS: unknown backend {name!r}; expected some of "
                                    f"{', '.join(KERNEL_BACKENDS)}")
        ok, why = get_backend(name).available()
        if not ok:
            raise pytest.UsageError(f"FUSER_TEST_BACKENDS names {name!r}, which is not usable here: {why}")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests whose files run fusions through lowering_checks.check run on one worker, in file
    order (xdist_group "kernels-for-nvrtc"): `check` records every kernel it ran in its process,
    and `test_every_generated_kernel_compiles_with_nvrtc` of test_lowering_ops.py and of
    test_schedulers.py compile all that their process recorded and no earlier test
    compiled. In one process that is every kernel the files collected before them ran (the
    folders first, then the files at the top, each in name order: execution/test_large_fusions,
    execution/test_static_extents, ops/test_random, schedulers/test_grid_reductions,
    schedulers/test_row_storage, test_lowering_ops, test_schedulers); kept together, they still
    are."""
    import lowering_checks

    for item in items:
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "check", None) is lowering_checks.check:
            item.add_marker(pytest.mark.xdist_group("kernels-for-nvrtc"))


def pytest_generate_tests(metafunc):
    if "kernel_backend" in metafunc.fixturenames:
        from lowering_checks import backends_under_test

        metafunc.parametrize("kernel_backend", backends_under_test())


def pytest_sessionfinish(session, exitstatus):
    if _OWNS_CACHE:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def memcheck_off():
    """FUSER_MEMCHECK=0 for one test (timing tests measure what users run), the suite's setting
    restored (and re-read) after it."""
    from fuser.lowering import settings

    before = os.environ.get("FUSER_MEMCHECK")
    os.environ["FUSER_MEMCHECK"] = "0"
    settings.reload()
    yield
    if before is None:
        del os.environ["FUSER_MEMCHECK"]
    else:
        os.environ["FUSER_MEMCHECK"] = before
    settings.reload()
