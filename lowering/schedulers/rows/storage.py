"""Where a persistent row schedule keeps the values later phases read again: per-thread register
arrays, or slots of dynamic shared memory when the row is too long for registers."""

from __future__ import annotations

from fuser.lowering.codegen import cuda_exprs as X
from fuser.lowering.codegen.analysis import RowAccess
from fuser.lowering.codegen.kernel import KernelPlan
from fuser.lowering.schedulers.rows.schedule import RowSchedule

_COMPUTE_BYTES = {"double": 8, "float": 4, "long long": 8, "int": 4, "bool": 1,
                  "fuser_complex<float>": 8, "fuser_complex<double>": 16}


KEEPS = ("prefetch", "values", "loads")
"""What a persistent row keeps: "prefetch": values, loads, and the row's other inputs loaded by
the first phase (every load of the row in flight at once); "values": loads and computed values
later phases read; "loads": loads only (computed values are recomputed)."""


def row_storage(plan: KernelPlan, keep: str) -> RowAccess:
    """What a persistent schedule keeps per thread (see KEEPS)."""
    analysis = plan.analysis
    return {"prefetch": analysis.rows_prefetch, "values": analysis.rows, "loads": analysis.rows_loads_only}[keep]


def kept_as_loaded(v, inputs) -> bool:
    """A kept value a shared-memory row stores as loaded: a kernel input of a 16-bit float dtype
    (2 bytes, not the float it computes in: the conversion back is exact)."""
    return v in inputs and v.type.dtype in X.NARROW_FLOATS


def shared_element_bytes(access: RowAccess, inputs) -> int:
    """Bytes of the widest element a shared-memory row keeps: a 16-bit float load as loaded
    (`kept_as_loaded`), any other value in its compute type (at least 4 bytes)."""
    sizes = [2 if kept_as_loaded(v, inputs) else max(4, _COMPUTE_BYTES[X.COMPUTE_TYPE[v.type.dtype]])
             for v, _ in access.kept]
    return max(sizes, default=4)


def element_bytes(access: RowAccess) -> int:
    """Bytes of the widest kept element (compute types: a bf16 load is kept as a float)."""
    return max([4, *(_COMPUTE_BYTES[X.COMPUTE_TYPE[v.type.dtype]] for v, _ in access.kept)])


def kept_words(access: RowAccess, iters: int, vec: int) -> int:
    """32-bit registers a thread needs to keep its share of the row (register arrays)."""
    _, slots = access.slots()
    return slots * iters * vec * element_bytes(access) // 4


class SharedRowStorage:
    """Where a shared-memory row schedule keeps each value: a slot of `iters * vec * block`
    elements in dynamic shared memory; thread t's element e at e * block + t (consecutive
    threads, consecutive words: no bank conflicts, and no barrier, each thread reads what it
    wrote). Values whose phases do not overlap share a slot."""

    BASE = "fuser_row_smem"

    def __init__(self, access: RowAccess, schedule: RowSchedule, inputs=frozenset()):
        """`inputs`: the kernel's inputs (plan.inputs): their 16-bit float loads are kept as loaded."""
        self.block = schedule.block
        self.inputs = frozenset(inputs)
        self.element_bytes = shared_element_bytes(access, self.inputs)
        self.slot_bytes = schedule.iters * schedule.vec * schedule.block * self.element_bytes
        self.slot_of, slots = access.slots()
        self.bytes = self.slot_bytes * slots

    def declare(self, name: str, ctype: str, slot: int) -> str:
        offset = slot * self.slot_bytes
        return f"const auto {name} = FUSER_SHARED_VIEW({ctype}, {self.BASE}, {offset});"

    def element(self, name: str, slot_var: str) -> str:
        return f"{name}[({slot_var}) * {self.block} + threadIdx.x]"

    def keeps_as_loaded(self, v) -> bool:
        """This kept value is stored in its storage type (`kept_as_loaded`)."""
        return kept_as_loaded(v, self.inputs)


__all__ = ["KEEPS", "SharedRowStorage", "element_bytes", "kept_as_loaded", "kept_words", "row_storage",
           "shared_element_bytes"]
