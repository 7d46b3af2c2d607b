"""The schedule of a row kernel: a value that states every decision, so that tests check
decisions on it and emission (rows/emit.py) only reads it.

How threads map to a row (the innermost dim reduced, `block_per_row`):
- a row is walked by `lanes` threads (a power of two), `vec` consecutive elements per access
  (16 bytes: 8 bf16 or 4 f32); a block holds `block // lanes` rows (several rows a warp when
  lanes < 32; then the lanes of a row reduce by shuffles within their group);
- `iters` > 0: *persistent*: each thread holds `iters` vectors of the row on chip (register
  arrays, or shared memory when `shared`), loaded once, so a normalization reads its input once
  however many phases it has; every reduction is its own phase;
- `iters` == 0: *streaming*: each phase walks the row in steps of `unroll` vectors a thread
  (that many loads in flight before the first is used); max and sum(exp(x - max)) merge into
  one online pass and sum / sum of squares into one Welford pass (`merged`), and the later
  phases re-read the row, which recent rows leave in L2.
The innermost dim kept (a *column* kernel: a bias gradient, a batch norm's statistics): one
thread per row, consecutive threads on consecutive rows (the kept innermost elements, so each
load of a warp is one contiguous access), `row_threads` threads of a block along the reduced
dims and, without normalization, `row_blocks` blocks (gridDim.y) along them; each thread
walks its share in steps of `unroll` elements, all loaded before any is used; the block's
threads of a row combine through shared memory, and the last of a row's blocks combines their
partials (lowering/schedulers/rows/columns.py). `vec` > 1: each thread takes that many
consecutive rows, one 16-byte access for all of them (nvFuser's vectorised outer reduction).

Everything reduced, no normalization: `split` the one row over the grid.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowSchedule:
    block: int
    block_per_row: bool
    """True: threads cooperate on a row (innermost dim reduced); False: a thread per row."""
    iters: int = 0
    """Persistent rows: vectors of the row each thread keeps on chip (0: streaming)."""
    lanes: int = 0
    """Threads per row (0: the whole block)."""
    vec: int = 1
    """Elements per global access along the row (1: scalar)."""
    unroll: int = 1
    """Streaming rows: vectors per thread per step of the row loop."""
    split: bool = False
    """Everything is reduced (one row): the row is split over the grid, the blocks' partials
    combined by the last block (lowering/schedulers/grid.py)."""
    shared: bool = False
    """The kept row values live in shared memory (slots of iters * vec * block elements), not
    in per-thread register arrays: rows too long for registers without spilling."""
    keep: str = "values"
    """"prefetch": the first phase also loads the row's other inputs, all kept with the values
    later phases read (every load of the row in flight at once); "values": loads and computed
    values later phases read are kept; "loads": only loads (what is computed from them is
    recomputed; fewer slots)."""
    min_blocks: int = 0
    """Blocks per SM the kernel is compiled for (`__launch_bounds__`: ptxas keeps registers
    within what that many blocks leave a thread); 0: no minimum."""
    row_threads: int = 1
    """A thread per row: threads of a block along the reduced dims (a power of two dividing the
    block; the block is `block // row_threads` rows wide)."""
    row_blocks: int = 1
    """A thread per row: blocks along the reduced dims (gridDim.y), the last of them combining
    the partials; more than 1 only where no reduction result flows back onto the rows."""

    @property
    def row_lanes(self) -> int:
        return self.lanes or self.block

    @property
    def rows_per_block(self) -> int:
        return self.block // self.row_lanes if self.block_per_row and not self.split else 1

    @property
    def persistent(self) -> bool:
        return self.block_per_row and self.iters > 0

    @property
    def columns(self) -> int:
        """A thread per row: the rows a block holds (its threads across the rows)."""
        return self.block // self.row_threads

    @property
    def merged(self) -> bool:
        """Reductions merge into one pass (online softmax, Welford): when a row is streamed by
        a block's threads or by one thread alone (threads and blocks along a thread-per-row's
        reduced dims make each phase its own pass, combined across them: rows/columns.py)."""
        if not self.block_per_row:
            return self.row_threads == 1 and self.row_blocks == 1
        return not self.persistent

    def describe(self) -> str:
        if self.split:
            return f"one row split over the grid, block: {self.block}, vec: {self.vec}, unroll: {self.unroll}"
        if not self.block_per_row:
            text = f"thread per row, block: {self.block}"
            if self.vec > 1:
                text += f", {self.vec} rows a thread"
            if self.row_threads > 1:
                text += f" ({self.columns} rows x {self.row_threads} threads along them)"
            if self.row_blocks > 1:
                text += f", {self.row_blocks} blocks along the rows"
            return text + (f", unroll: {self.unroll}" if self.unroll > 1 else "")
        rows = self.rows_per_block
        shape = f"{rows} rows of {self.row_lanes} lanes" if rows > 1 else "block per row"
        text = f"{shape}, block: {self.block}, vec: {self.vec}"
        if self.persistent:
            text += f", iters: {self.iters}"
            if self.shared:
                text += f", row in shared memory (keeps {self.keep})"
            elif self.keep != "values":
                text += f", keeps {self.keep}"
        else:
            text += f", streaming, unroll: {self.unroll}"
        if self.min_blocks:
            text += f", min blocks/SM: {self.min_blocks}"
        return text


__all__ = ["RowSchedule"]
