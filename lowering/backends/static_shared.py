"""The static shared memory of a kernel as the CPU emulation counts it, for its launch limits
(lowering/device.py `shared_memory_optin`): on the GPU the compiler's figure is the function's
SHARED_SIZE_BYTES; the emulation, which has no compiler report (`__shared__` arrays are plain
thread-local arrays there), sums the kernel's `__shared__` declarations as ptxas lays them out.
A check of what the GPU would refuse, like racecheck.py's rewrite of the same declarations: it
decides nothing about the kernel (test/pytest/backends/test_compiled_code_sweep.py checks the
figure against ptxas's for every swept kernel)."""

from __future__ import annotations

import re

_SHARED_DECLARATION = re.compile(
    r"__shared__\s+(?:__align__\((?P<align1>\d+)\)\s+)?(?P<type>[A-Za-z_][\w\s<>:,]*?)\s+"
    r"(?:__align__\((?P<align2>\d+)\)\s+)?(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]+\]\s*)*);")
_SHARED_TYPE_BYTES = {"char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "short": 2, "unsigned short": 2,
                      "__half": 2, "__nv_bfloat16": 2, "int": 4, "unsigned": 4, "unsigned int": 4, "float": 4,
                      "long long": 8, "unsigned long long": 8, "long": 8, "unsigned long": 8, "double": 8,
                      "fuser_complex<float>": 8, "fuser_complex<double>": 16}
_SHARED_TYPE_ALIGN = {"fuser_complex<float>": 4, "fuser_complex<double>": 8}
_CONSTANT = re.compile(r"[0-9\s()+*/%-]+")


def static_shared_bytes(source: str, kernel: str) -> int:
    """The static shared memory `kernel` of `source` declares (`__shared__` arrays in its body),
    laid out in declaration order, each at its alignment: what ptxas reports as its `smem` (the CI
    sweep checks that the two agree). A declaration whose type or extent is not a known C type
    and integer constant expression counts as 0 (the emulation cannot size it; the GPU's
    compiler still checks it)."""
    start = source.find(f" {kernel}(")
    if start < 0:
        return 0
    end = source.find(f"FUSER_HOST_LAUNCHER({kernel})", start)
    body = source[start:end if end >= 0 else len(source)]
    offset = 0
    for m in _SHARED_DECLARATION.finditer(body):
        ctype = " ".join(m["type"].replace("const", " ").split())
        size = _SHARED_TYPE_BYTES.get(ctype)
        dims = re.findall(r"\[([^\]]+)\]", m["dims"])
        if size is None or not dims or not all(_CONSTANT.fullmatch(d) for d in dims):
            continue
        count = 1
        for d in dims:
            count *= int(eval(d.replace("/", "//"), {"__builtins__": {}}, {}))  # digits and operators only
        align = max(int(m["align1"] or m["align2"] or 0), _SHARED_TYPE_ALIGN.get(ctype, size))
        offset = (offset + align - 1) // align * align + size * count
    return offset


__all__ = ["static_shared_bytes"]
