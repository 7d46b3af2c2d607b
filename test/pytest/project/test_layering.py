"""The import layering of the packages (docs/architecture.md#the-layout): data flows one way, and nothing below the
public package imports upward. Checked on the source (lazy imports inside functions count)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

FORBIDDEN = {
    "fuser_dialect": ("fuser",),  # the IR imports neither the compiler nor the public package
    "passes": ("fuser.lowering", "fuser.execution", "fuser.tools", "fuser.benchmarks"),
    "lowering": ("fuser.execution", "fuser.tools", "fuser.benchmarks"),
}


def _imported_modules(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _sources():
    for folder in FORBIDDEN:
        yield from sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_upward_imports(path):
    folder = path.relative_to(ROOT).parts[0]
    for module in _imported_modules(path):
        for banned in FORBIDDEN[folder]:
            assert not (module == banned or module.startswith(banned + ".")), f"{path.relative_to(ROOT)} imports {module}"


def test_the_check_sees_lazy_imports(tmp_path):
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from fuser.lowering.execution.executor import FusionExecutor\n")
    assert "fuser.lowering.execution.executor" in _imported_modules(lazy)


def test_every_package_folder_is_installed():
    """pyproject.toml lists packages explicitly (folders are mapped under `fuser.*`): a package
    folder missing from the list works in an editable install and is absent from a wheel."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: pathlib.Path(path) for name, path in setup["package-dir"].items()}

    def folder_of(package: str) -> pathlib.Path:
        parts = package.split(".")
        for k in range(len(parts), 0, -1):
            mapped = folders.get(".".join(parts[:k]))
            if mapped is not None:
                return mapped.joinpath(*parts[k:])
        return pathlib.Path(*parts)

    listed = {folder_of(p) for p in setup["packages"]}
    on_disk = {init.parent.relative_to(ROOT) for top in folders.values()
               for init in (ROOT / top).rglob("__init__.py")}
    assert not on_disk - listed, f"package folders not in pyproject.toml's packages: {sorted(map(str, on_disk - listed))}"


def _run_time_imports(path: pathlib.Path) -> list[str]:
    """Every module name `path` imports when it runs, and for `from m import n` also `m.n`
    (lazy imports inside functions included; imports under `if TYPE_CHECKING:` are
    annotations only, and left out)."""
    tree = ast.parse(path.read_text())
    annotation_only = {id(n) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                       for child in node.body for n in ast.walk(child)}
    names = []
    for node in ast.walk(tree):
        if id(node) in annotation_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def _runtime_imports(path: pathlib.Path, package: str) -> set[str]:
    """The modules directly in `package` that `path` imports at run time."""
    return {n.split(".")[1] for n in _run_time_imports(path) if n.startswith(package + ".") and n.count(".") == 1}


def test_the_dialect_modules_import_without_a_cycle():
    """fuser_dialect's modules form no import cycle: values (Tensor, Scalar, Vector) <- the op
    and rule modules <- builder_ops <- builder, so any of them can be read and imported alone."""
    folder = ROOT / "fuser_dialect"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {m: _runtime_imports(folder / f"{m}.py", "fuser_dialect") & modules for m in modules}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            assert state.get(n) != 1, f"import cycle: {' -> '.join(path[path.index(n):] + [n]) if n in path else n}"
            if n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])


LOWERING_LAYERS = {
    # folder of lowering/: the folders of lowering/ it must not import (docs/architecture.md).
    # Top-level modules (settings, errors, addresses) import no folder and are open to all.
    "runtime": ("backends", "codegen", "schedulers", "segmentation", "execution"),
    "backends": ("codegen", "schedulers", "segmentation", "execution"),
    "codegen": ("backends", "schedulers", "segmentation", "execution"),
    "schedulers": ("backends", "segmentation", "execution"),
    "segmentation": ("backends", "execution"),
    "execution": (),
}


def _lowering_imports(path: pathlib.Path) -> set[str]:
    """The lowering/ folders and top-level modules `path` imports at run time."""
    return {n.split(".")[2] for n in _run_time_imports(path) if n.startswith("fuser.lowering.")}


@pytest.mark.parametrize("path", sorted((ROOT / "lowering").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_lowering_folders_import_down_the_pipeline(path):
    """segmentation -> schedulers -> codegen, and execution over all of them and the backends;
    backends and codegen know nothing of each other (annotation-only imports aside)."""
    parts = path.relative_to(ROOT / "lowering").parts
    imported = _lowering_imports(path)
    if len(parts) == 1:  # a top-level module: shared by every folder, so it imports none of them
        assert not imported & set(LOWERING_LAYERS), f"lowering/{parts[0]} imports {sorted(imported & set(LOWERING_LAYERS))}"
        return
    banned = imported & set(LOWERING_LAYERS[parts[0]])
    assert not banned, f"lowering/{'/'.join(parts)} imports lowering/{sorted(banned)}"


def test_every_lowering_folder_has_a_layer():
    folders = {p.name for p in (ROOT / "lowering").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LOWERING_LAYERS)


def test_the_folder_check_sees_lazy_imports_but_not_annotations(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from fuser.lowering.schedulers.base import SchedulerUnit\n"
                      "def f():\n    from fuser.lowering.execution import launch\n")
    assert _lowering_imports(module) == {"execution"}
