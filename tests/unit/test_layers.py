"""The layers contract of `pyproject.toml` (`lint-imports`): agentrl keeps it, and it catches a lower layer that
imports a higher one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (pip install -e '.[dev]')")


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_agentrl_keeps_its_layers():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 kept, 0 broken" in result.stdout


def test_every_top_level_package_has_a_layer_and_none_is_excused():
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layered = {name.strip() for layer in contract["layers"] for name in layer.split(":")}
    top_level = {
        f"agentrl.{p.stem}"
        for p in (ROOT / "agentrl").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert top_level - layered == set(), "give these a layer in pyproject.toml's [tool.importlinter]"
    assert not contract.get("ignore_imports"), "the contract excuses imports that run against the layers"


def test_the_contract_catches_a_lower_layer_importing_a_higher_one(tmp_path: Path):
    """A package shaped like agentrl (one module per layer package) under the same contract: clean, it passes;
    once `agentrl.types` imports `agentrl.trainer`, it fails and names the import."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract["contracts"][0].pop("ignore_imports", None)
    package = tmp_path / "agentrl"
    for layer in contract["contracts"][0]["layers"]:
        for name in layer.split(" : "):
            module = package.joinpath(*name.split(".")[1:])
            module.mkdir(parents=True, exist_ok=True)
            (module / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "trainer" / "__init__.py").write_text("from agentrl import types\n")  # down: allowed
    (tmp_path / "pyproject.toml").write_text(_toml(contract))
    assert lint(tmp_path).returncode == 0
    (package / "types" / "__init__.py").write_text("from agentrl import trainer\n")  # up: refused
    result = lint(tmp_path)
    assert result.returncode != 0 and "agentrl.types -> agentrl.trainer" in result.stdout


def _toml(contract: dict) -> str:
    (layers,) = [c["layers"] for c in contract["contracts"]]
    listed = ",\n".join(f'  "{layer}"' for layer in layers)
    return (
        '[tool.importlinter]\nroot_package = "agentrl"\n\n[[tool.importlinter.contracts]]\n'
        f'name = "layers"\ntype = "layers"\nlayers = [\n{listed},\n]\n'
    )


def test_no_module_imports_one_that_imports_it_back():
    """No cycles between modules, direct or longer (the strongly connected parts of the import graph)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("agentrl", cache_dir=None)
    assert _cycles(graph) == []


def _cycles(graph) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found
