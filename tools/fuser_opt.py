"""`fuser-opt`: xDSL's opt driver with the fuser dialect, passes and the `cuda` target.

Bad input never ends in a Python traceback: parse errors and verifier errors are
printed as located diagnostics (stderr, exit 1) unless --parsing-diagnostics /
--verify-diagnostics ask for them on stdout (exit 0) for FileCheck. Files that cannot
be read or written are one-line errors (`fuser-opt: error: ...`, exit 1). As in
mlir-opt, `-` names stdin (input) or stdout (`-o -`), and an input with no ops (empty,
or only comments) is an empty module."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.lexer import Span
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from fuser_dialect.dialect import Fuser
from fuser_dialect.fusion import fusion_funcs, verify_fusion
from fuser.passes.registry import all_pass_factories


class DriverError(Exception):
    """A problem with the command line or the files it names, reported as one line."""


class _LocatingParser(Parser):
    """Remembers where each op's text starts, so that a verifier error (which knows the op but
    not the text) can be reported at its line like a parse error."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.op_starts: dict[Operation, int] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        op = super().parse_operation()
        self.op_starts[op] = start
        return op


@dataclasses.dataclass
class _ParsedChunk:
    """The last chunk parsed: what locating a verifier error needs."""

    parser: _LocatingParser
    line_offset: int = 0

    def span_of(self, op: Operation) -> Span | None:
        """The first line of `op`'s text, from its first token; None for ops not parsed here."""
        start = self.parser.op_starts.get(op)
        if start is None:
            return None
        text = self.parser.lexer.input.content
        line_end = text.find("\n", start)
        end = len(text.rstrip()) if line_end < 0 else start + len(text[start:line_end].rstrip())
        return Span(start, max(end, start + 1), self.parser.lexer.input, self.line_offset)


class FuserOptMain(xDSLOptMain):
    _chunk: _ParsedChunk | None = None  # the chunk being parsed or run, to locate its errors
    _chunk_offset = 0  # its first line in the file (--split-input-file)
    _error_span: Span | None = None  # where the verifier error being raised was written

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("fuser", lambda: Fuser)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            parser = _LocatingParser(self.ctx, io.read(), self.get_input_name())
            self._chunk = _ParsedChunk(parser, self._chunk_offset)
            if _has_no_ops(parser.lexer.input.content) and not self.args.no_implicit_module:
                return ModuleOp([])  # mlir-opt accepts an empty input as an empty module
            try:
                return parser.parse_module(not self.args.no_implicit_module)
            except RecursionError:
                # Each nesting level ({, [, ( or a region) costs the parser Python frames.
                text = parser.lexer.input.content
                pos = min(parser.pos, len(text))
                line = text.count("\n", 0, pos) + 1 + self._chunk_offset
                column = pos - (text.rfind("\n", 0, pos) + 1) + 1
                raise DriverError(f"{self.get_input_name()}:{line}:{column}: the input nests too deeply to parse "
                                  f"(Python's recursion limit; fusions nest a few levels)") from None
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

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        # xDSL lists its ~140 passes with fuser's at the end: fuser's come first, as a group.
        ours = list(all_pass_factories())
        theirs = [name for name in self.available_passes if name not in ours]
        for action in arg_parser._actions:
            if "--passes" in action.option_strings:
                action.help = (f"comma-separated pipeline, e.g. 'fuser-preseg,segment'. fuser's passes: "
                               f"{', '.join(ours)}. xDSL's passes (also accepted): {', '.join(theirs)}")

    def register_all_targets(self) -> None:
        super().register_all_targets()
        try:
            from fuser.tools.cuda_target import CudaTarget
        except ImportError:
            return
        self.available_targets["cuda"] = lambda: CudaTarget

    # -- files: `-` is stdin/stdout; a file that cannot be opened is a DriverError ----------

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        name = self.args.input_file
        if name is None or name == "-":
            return sys.stdin.buffer, "mlir"
        try:
            stream = open(name, "rb")
        except OSError as e:
            raise DriverError(f"cannot open input file '{name}': {e.strerror or e}") from None
        return stream, os.path.splitext(name)[1].removeprefix(".")

    def get_input_name(self) -> str:
        name = self.args.input_file
        return "stdin" if name is None or name == "-" else name

    def prepare_output(self) -> IO[str]:
        name = self.args.output_file
        if name is None or name == "-":
            return sys.stdout
        try:
            return open(name, "w")
        except OSError as e:
            raise DriverError(f"cannot open output file '{name}': {e.strerror or e}") from None

    # -- locating verifier errors --------------------------------------------------------

    def parse_chunk(self, chunk, file_extension, offset=0) -> ModuleOp | None:
        self._chunk_offset = offset  # the frontend gets only the stream
        self._chunk = None
        module = super().parse_chunk(chunk, file_extension, offset)
        if module is not None:
            for f in fusion_funcs(module):
                with self._locating(f):
                    verify_fusion(f)
        return module

    def setup_pipeline(self) -> None:
        super().setup_pipeline()
        verify = self.pipeline.callback

        def callback(previous_pass, module, next_pass) -> None:
            if verify is None:
                return
            if previous_pass is not None:  # IR made by a pass has no text to point at
                return verify(previous_pass, module, next_pass)
            try:
                verify(previous_pass, module, next_pass)
            except DiagnosticException:
                bad = _first_invalid_op(module)
                self._error_span = self._chunk.span_of(bad) if self._chunk and bad else None
                raise

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    @contextlib.contextmanager
    def _locating(self, op: Operation):
        """A DiagnosticException raised inside is located at `op`'s text."""
        try:
            yield
        except DiagnosticException:
            self._error_span = self._chunk.span_of(op) if self._chunk else None
            raise

    def run(self) -> None:
        try:
            super().run()
        except DriverError as e:
            _fail(str(e))
        except ParseError as e:
            print(e, file=sys.stderr)
            sys.exit(1)
        except DiagnosticException as e:
            # Located like a parse error when the op's text is known.
            span = self._error_span
            print(span.print_with_context(str(e)) if span is not None else e, file=sys.stderr)
            # The IR with the failing op marked (added by Operation.emit_error).
            for note in getattr(e, "__notes__", ()):
                print(note, file=sys.stderr)
            sys.exit(1)
        except BrokenPipeError:
            # The reader (e.g. `| head`) went away: stop quietly (the Python docs' recipe:
            # point stdout at devnull so that the flush at exit does not fail again).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except OSError as e:
            # Reading or writing failed after the files were opened (a full disk, EIO).
            _fail(f"{e.strerror or e}" + (f": '{e.filename}'" if e.filename else ""))
        except ValueError as e:
            # Pass options and pass preconditions (e.g. concretize without extents).
            _fail(str(e))
        except RecursionError:
            _fail("the IR nests too deeply to process (Python's recursion limit; fusions nest a few levels)")


def _fail(message: str) -> None:
    print(f"fuser-opt: error: {message}", file=sys.stderr)
    sys.exit(1)


def _has_no_ops(text: str) -> bool:
    """True for an input of only blank and `//` comment lines."""
    return all(not line.strip() or line.strip().startswith("//") for line in text.splitlines())


def _first_invalid_op(module: ModuleOp) -> Operation | None:
    """The op whose own verifier fails first in the order xDSL verifies (nested ops before
    their parent), or None."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except (DiagnosticException, ValueError):
            return op
    return None


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
        tool = FuserOptMain(description="fuser-opt: xDSL's optimizer driver with the fuser dialect, its passes and a "
                                        "cuda target", args=args)
    except (ValueError, ParseError, ArgSpecParseError) as e:
        # The pipeline is built here: unknown pass names, malformed pass options.
        print(f"fuser-opt: error: {_pass_option_at_fault(args) or e}", file=sys.stderr)
        sys.exit(1)
    tool.run()


def _pass_option_at_fault(args: Sequence[str] | None) -> str | None:
    """The pass and option whose value xDSL refused ("Incompatible types: given ('maybe',),
    expected <class 'bool'>" names neither), found by building the pipeline's passes again
    one option at a time; None when that is not the error."""
    from xdsl.passes import parse_pipeline

    argv = list(sys.argv[1:] if args is None else args)
    specs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-p", "--passes")]
    specs += [a.split("=", 1)[1] for a in argv if a.startswith("--passes=")]
    factories = all_pass_factories()
    for text in specs:
        try:
            passes = list(parse_pipeline(text))
        except Exception:
            return None
        for spec in passes:
            factory = factories.get(spec.name)
            if factory is None:
                continue
            for option, value in spec.parameters.items():
                try:
                    factory().from_pass_spec(dataclasses.replace(spec, parameters={option: value}))
                except Exception as e:
                    shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
                    return f"pass '{spec.name}': option '{option}={shown}': {e}"
    return None


if __name__ == "__main__":
    main()
