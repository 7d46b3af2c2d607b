"""The ATen → fuser op table: one `Translation` per ATen overload.

A translation has two small functions: `build(tx, node)` emits the op through `fd.ops`
(tx is the `Translator` of fusion_builder.py) and returns the node's value; `check(node)`
returns why this particular call cannot be translated (an argument form fuser lacks), or
None. The dtype and device checks common to every op live in support.py, so a check only
looks at what is special about its op.

Adding an op is one `@translates(aten.op.overload, ...)` function in a `translate_*.py`
module (and its check, where some argument forms are out of reach); nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch.fx

Build = Callable[["object", torch.fx.Node], object]
Check = Callable[[torch.fx.Node], "str | None"]


@dataclass(frozen=True)
class Translation:
    build: Build
    check: Check | None = None
    # Ops that move no data on their own (views, constants): a region made only of these
    # (plus one compute op) is not worth a fusion, and they are not counted as fused compute.
    non_compute: bool = False


TRANSLATIONS: dict[object, Translation] = {}


def translates(*targets, check: Check | None = None, non_compute: bool = False):
    """Registers the decorated `build(tx, node)` for every ATen overload in `targets`."""

    def register(build: Build) -> Build:
        for target in targets:
            if target in TRANSLATIONS:
                raise ValueError(f"{target} already has a translation")
            TRANSLATIONS[target] = Translation(build, check, non_compute)
        return build

    return register


def translation_for(target) -> Translation | None:
    _load_translations()
    return TRANSLATIONS.get(target)


_loaded = False


def _load_translations() -> None:
    """Imports the translate_* modules once (they fill TRANSLATIONS as they load)."""
    global _loaded
    if not _loaded:
        from fuser.torch_backend import (  # noqa: F401
            translate_index,
            translate_pointwise,
            translate_reduction,
            translate_shape,
        )

        _loaded = True
