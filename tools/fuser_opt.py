"""`fuser-opt`: xDSL's opt driver with the fuser dialect, passes and the `cuda` target.

Bad input never ends in a Python traceback: parse errors and verifier errors are
printed as located diagnostics (stderr, exit 1) unless --parsing-diagnostics /
--verify-diagnostics ask for them on stdout (exit 0) for FileCheck."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from fuser_dialect.dialect import Fuser
from fuser_dialect.fusion import fusion_funcs, verify_fusion
from passes.registry import all_pass_factories


class FuserOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("fuser", lambda: Fuser)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in all_pass_factories().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        try:
            from lowering.targets import CudaTarget
        except ImportError:
            return
        self.available_targets["cuda"] = lambda: CudaTarget

    def parse_chunk(self, chunk, file_extension, offset=0) -> ModuleOp | None:
        module = super().parse_chunk(chunk, file_extension, offset)
        if module is not None:
            for f in fusion_funcs(module):
                verify_fusion(f)
        return module

    def run(self) -> None:
        try:
            super().run()
        except (ParseError, DiagnosticException) as e:
            print(e, file=sys.stderr)
            sys.exit(1)
        except ValueError as e:
            # Pass options and pass preconditions (e.g. concretize without extents).
            print(f"fuser-opt: error: {e}", file=sys.stderr)
            sys.exit(1)


def main(args: Sequence[str] | None = None) -> None:
    FuserOptMain(args=args).run()


if __name__ == "__main__":
    main()
