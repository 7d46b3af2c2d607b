# lit configuration of the fuser FileCheck suites (test/dialect, test/passes, test/lowering).
# Run from the repo root: `lit -v test/` (or one folder: `lit -v test/dialect`).

import os
import sys

import lit.formats

config.name = "fuser"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
# pytest tests live beside the lit suites and must not be collected; lit's own scratch
# folders (`Output`) may appear under a suite when it runs in-tree; `Inputs` folders hold
# files that RUN lines read, not tests.
config.excludes = ["pytest", "Inputs", "Output", "__pycache__", "lit.cfg.py", "lit.site.cfg.py"]

# fuser-opt and filecheck are console scripts next to the interpreter running lit; when
# the virtual environment is not activated they are not on the caller's PATH.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
# Imports of the repository's packages work from any working directory.
repo_root = os.path.dirname(config.test_source_root)
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in [repo_root, os.environ.get("PYTHONPATH", "")] if p
)

# A hung fuser-opt must fail its test, not the whole run. lit can only kill a test's
# process tree with psutil installed; without it the suite runs with no limit.
supported, why = lit_config.maxIndividualTestTimeIsSupported
if supported:
    # Generous: a loaded 2-core CI machine runs many fuser-opt processes of a file in turn.
    config.maxIndividualTestTime = 120
else:
    lit_config.note(f"no per-test timeout: {why}")
