"""`fuser-opt`: xDSL's opt driver with the fuser dialect, passes and the `cuda` target.

Bad input never ends in a Python traceback: parse errors and verifier errors are
printed as located diagnostics (stderr, exit 1) unless --parsing-diagnostics /
--verify-diagnostics ask for them on stdout (exit 0) for FileCheck."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from fuser_dialect.dialect import Fuser
from fuser_dialect.fusion import fusion_funcs, verify_fusion
from fuser.passes.registry import all_pass_factories


class FuserOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("fuser", lambda: Fuser)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            parser = Parser(self.ctx, io.read(), self.get_input_name())
            try:
                return parser.parse_module(not self.args.no_implicit_module)
            except VerifyException as e:
                # xDSL checks operand/result type constraints while it parses an op's custom
                # syntax and raises with no location: point at the op just parsed instead.
                start, end = _last_code_line(parser.lexer.input.content, parser.pos)
                parser.raise_error(str(e), start, end)

        self.available_frontends["mlir"] = parse_mlir

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in all_pass_factories().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        try:
            from fuser.lowering.targets import CudaTarget
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
        except ParseError as e:
            print(e, file=sys.stderr)
            sys.exit(1)
        except DiagnosticException as e:
            print(e, file=sys.stderr)
            # The IR with the failing op marked (added by Operation.emit_error).
            for note in getattr(e, "__notes__", ()):
                print(note, file=sys.stderr)
            sys.exit(1)
        except BrokenPipeError:
            # The reader (e.g. `| head`) went away: stop quietly (the Python docs' recipe:
            # point stdout at devnull so that the flush at exit does not fail again).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except ValueError as e:
            # Pass options and pass preconditions (e.g. concretize without extents).
            print(f"fuser-opt: error: {e}", file=sys.stderr)
            sys.exit(1)


def _last_code_line(text: str, pos: int) -> tuple[int, int]:
    """(start, end) of the code just before `pos`: its line, skipping blank and comment lines."""
    end = pos
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        if line.strip() and not line.strip().startswith("//"):
            return start + len(line) - len(line.lstrip()), start + len(line.rstrip())
        end = start - 1
    return 0, pos


def main(args: Sequence[str] | None = None) -> None:
    try:
        tool = FuserOptMain(args=args)
    except (ValueError, ParseError, ArgSpecParseError) as e:
        # The pipeline is built here: unknown pass names, malformed pass options.
        print(f"fuser-opt: error: {e}", file=sys.stderr)
        sys.exit(1)
    tool.run()


if __name__ == "__main__":
    main()
