"""Disjoint sets of hashable items: the one union-find of the compiler (symbolic extents,
concretize's exact dim classes, segmentation's dataflow components)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class UnionFind(Generic[T]):
    """An item never added nor united is a set of its own; `len` counts the items known."""

    def __init__(self) -> None:
        self._parent: dict[T, T] = {}

    def __len__(self) -> int:
        return len(self._parent)

    def add(self, item: T) -> None:
        self._parent.setdefault(item, item)

    def find(self, item: T) -> T:
        parent = self._parent
        while (up := parent.get(item, item)) != item:
            # Path halving: point each visited item at its grandparent.
            parent[item] = parent.get(up, up)
            item = parent[item]
        return item

    def union(self, keep: T, other: T) -> T:
        """Merges the sets of `keep` and `other`; the root of `keep`'s set stays the root."""
        root, other_root = self.find(keep), self.find(other)
        if root != other_root:
            self.add(root)
            self._parent[other_root] = root
        return root
