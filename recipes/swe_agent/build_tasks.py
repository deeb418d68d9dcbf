"""Build the bundled SWE task set from PyPI sdists by bug injection (in the spirit of SWE-smith).

    .venv/bin/python recipes/swe_agent/build_tasks.py              # ~20 min on 2 cores; needs Docker and PyPI
    .venv/bin/python recipes/swe_agent/build_tasks.py --tier easy  # the swe_easy recipe's tasks

For each package below: download its sdist (cached in ~/.cache/agentrl/swe), run its own test suite in a sandbox
of the test environment image, then try one-token mutations (`mutations.py`) of its functions, keeping those that
make between 1 and `MAX_F2P` passing tests fail. A kept mutation becomes a SWE-bench task:

* `patch` (gold) reverses the mutation; `test_patch` re-adds the test files holding the failing tests, which are
  hidden from the agent (as SWE-bench hides the tests of its fixes);
* FAIL_TO_PASS are the tests the mutation breaks, PASS_TO_PASS the other tests of those files;
* the problem statement reports the symptom: a failing check from the test suite and its error, never the fix.

Every task is then validated in its real image through `agentrl.swe.grading`: the gold patch must resolve it and
the empty patch must leave every FAIL_TO_PASS test failing and every PASS_TO_PASS test passing. The survivors are
written to data/train.jsonl and data/eval.jsonl (one task per package held out).

`--tier easy` builds the `swe_easy` recipe's tasks instead (`recipes/swe_easy/data`): the bug is a parameter's
name mistyped where the function reads it (`mutations.name_typos`), kept only when the failing test's traceback
ends at that line with a NameError; the problem statement is the last 12 lines of that frame of the traceback (the
code up to the line, pytest's `>` marker, the error and `path:line`). Two tasks per package are held out.

`--more` builds the same kind of bugs in `MORE_PACKAGES`, packages no other tier touches, for `swe_explore`
(`recipes/swe_explore/data`, beside the easy tier's rows that recipe also reads):

    .venv/bin/python recipes/swe_agent/build_tasks.py --more --per-package 6 --max-tries 24 --jobs 2 --held-out 3
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import hashlib
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from mutations import Mutation, mutations, name_typos

from agentrl.sandbox.docker import DockerSandbox
from agentrl.sandbox.recipe_images import build_recipe_image
from agentrl.swe.grading import REPORT, TEST_COMMAND, grade_patch
from agentrl.swe.images import (
    base_commit_of,
    base_tree,
    build_task_images,
    cache_dir,
    env_context,
    fetch_sdist,
    unpack_sdist,
)
from agentrl.swe.report import Outcome, files_of_tests, first_failure, parse_junit
from agentrl.swe.task import SWETask, load_tasks, write_rows
from agentrl.tools.builtin.pytest_report import last_frame

HERE = Path(__file__).resolve().parent
TEST_REQUIREMENTS = ["pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "packaging==26.3", "pygments==2.21.0"]
MAX_F2P = 30
MAX_HIDDEN_FILES = 2
EASY_FRAME_LINES = 12  # the end of the function: with its docstring, the model loses the line


@dataclass
class Package:
    """A pure-Python PyPI package whose sdist ships its tests."""

    name: str
    version: str
    repo: str
    sources: list[str]
    tests: list[str]
    python_path: list[str] = field(default_factory=lambda: ["."])

    @property
    def slug(self) -> str:
        return self.repo.replace("/", "__")


PACKAGES = [
    Package("inflection", "0.5.1", "jpvanhal/inflection", ["inflection/__init__.py"], ["test_inflection.py"]),
    Package("six", "1.17.0", "benjaminp/six", ["six.py"], ["test_six.py"]),
    Package("schema", "0.7.8", "keleshev/schema", ["schema/__init__.py"], ["test_schema.py"]),
    Package("parse", "1.22.4", "r1chardj0n3s/parse", ["parse/__init__.py"], ["tests"]),
    Package(
        "toolz",
        "1.0.0",
        "pytoolz/toolz",
        sources=["toolz/itertoolz.py", "toolz/dicttoolz.py", "toolz/functoolz.py", "toolz/recipes.py"],
        tests=["toolz/tests"],
    ),
    Package(
        "cachetools",
        "8.0.1",
        "tkem/cachetools",
        sources=["src/cachetools/__init__.py", "src/cachetools/keys.py"],
        tests=["tests"],
        python_path=["src"],
    ),
    Package(
        "webcolors",
        "25.10.0",
        "ubernostrum/webcolors",
        sources=["src/webcolors/_conversion.py", "src/webcolors/_normalization.py"],
        tests=["tests"],
        python_path=["src"],
    ),
    Package(
        "boltons",
        "26.2.0",
        "mahmoud/boltons",
        sources=[f"boltons/{m}.py" for m in ("strutils", "iterutils", "listutils", "setutils", "mathutils")],
        tests=["tests"],
    ),
]


# `--more`: the explore tier's own bugs, in packages no other tier touches (isodate and jmespath were tried: each
# typo broke more than MAX_F2P tests in the one, and the other's suite does not run from its sdist)
MORE_PACKAGES = [
    Package("idna", "3.21", "kjd/idna", ["idna/core.py"], ["tests/test_idna.py"]),
    Package("more-itertools", "11.2.1", "more-itertools/more-itertools",
            ["more_itertools/more.py", "more_itertools/recipes.py"], ["tests"]),
    Package("pathspec", "1.1.1", "cpburnz/python-pathspec", ["pathspec/util.py", "pathspec/pathspec.py"], ["tests"]),
    Package("semver", "3.2.0", "python-semver/python-semver", ["src/semver/version.py", "src/semver/_deprecated.py"],
            ["tests"], python_path=["src"]),
    Package("tabulate", "0.10.0", "astanin/python-tabulate", ["tabulate/__init__.py"], ["test"]),
    Package("mistune", "3.4.0", "lepture/mistune",
            [f"src/mistune/{m}.py" for m in ("util", "inline_parser", "block_parser", "core")],
            ["tests"], python_path=["src"]),
]  # fmt: skip


def log(msg: str) -> None:
    print(f"[build_tasks] {msg}", file=sys.stderr, flush=True)


# ---- running the package's tests in a sandbox ---------------------------------------------------------------


class Suite:
    """A package's clean source in a sandbox, where its tests run with and without a mutation."""

    def __init__(self, pkg: Package, sandbox: DockerSandbox, clean: Path):
        self.pkg, self.sandbox, self.clean = pkg, sandbox, clean
        self.env = {"PYTHONPATH": ":".join([*(f"/work/testbed/{p}" for p in pkg.python_path), "/opt/swe/deps"])}
        self.timeout = 300.0

    async def run(self) -> tuple[dict[str, Outcome], str]:
        cmd = TEST_COMMAND.format(report=REPORT, files=" ".join(self.pkg.tests))
        await self.sandbox.exec(f"rm -f {REPORT}", timeout=10)
        result = await self.sandbox.exec(cmd, timeout=self.timeout, workdir="/work/testbed", env=self.env)
        if result.timed_out:
            return {}, ""
        try:
            xml = (await self.sandbox.read_file(REPORT)).decode()
        except FileNotFoundError:
            return {}, ""
        return parse_junit(xml), xml

    async def try_mutation(self, m: Mutation) -> tuple[dict[str, Outcome], str]:
        original = (self.clean / m.path).read_text()
        await self.sandbox.write_file(f"/work/testbed/{m.path}", m.source)
        try:
            return await self.run()
        finally:
            await self.sandbox.write_file(f"/work/testbed/{m.path}", original)


# ---- turning a mutation into a task --------------------------------------------------------------------------


def test_source(clean: Path, test_id: str, max_lines: int = 40) -> str:
    """The source of the test function `test_id` names, dedented (its first `max_lines` lines)."""
    path, *names = test_id.split("::")
    names = [n.split("[", 1)[0] for n in names]
    try:
        source = (clean / path).read_text()
        node: ast.AST = ast.parse(source)
    except (OSError, SyntaxError):
        return ""
    for name in names:
        body = getattr(node, "body", [])
        match = [n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == name]
        if not match:
            return ""
        node = match[0]
    text = textwrap.dedent(ast.get_source_segment(source, node, padded=True) or "")
    lines = text.splitlines()
    return "\n".join(lines[:max_lines] + (["    ..."] if len(lines) > max_lines else []))


def failure_message(xml: str, test_id: str, max_chars: int = 900) -> str:
    msg = first_failure(xml, test_id).strip()
    return msg if len(msg) <= max_chars else msg[:max_chars] + " ..."


def problem_statement(pkg: Package, f2p: list[str], clean: Path, xml: str) -> str:
    """An issue describing the symptom: a failing check and its error, never where the bug is."""
    first = f2p[0]
    name = first.split("::")[-1].split("[", 1)[0].removeprefix("test_").replace("_", " ").strip()
    parts = [f"{pkg.name}: {name} no longer works as documented", ""]
    parts.append(
        f"Since a recent change, `{pkg.name}` misbehaves: "
        + (f"{len(f2p)} checks of its test suite fail. " if len(f2p) > 1 else "a check of its test suite fails. ")
        + "This one reproduces it:"
    )
    source = test_source(clean, first)
    if source:
        parts += ["", "```python", source, "```"]
    message = failure_message(xml, first)
    if message:
        parts += ["", "It fails with:", "", "```", message, "```"]
    others = [t.split("::")[-1] for t in f2p[1:6]]
    if others:
        parts += ["", "Other failing checks: " + ", ".join(f"`{o}`" for o in others) + (" ..." if len(f2p) > 6 else "")]
    parts += ["", "The checks describe the intended behaviour; please fix the library code so they pass again."]
    return "\n".join(parts)


def easy_problem_statement(pkg: Package, f2p: list[str], m: Mutation, xml: str) -> str | None:
    """The easy tier's issue: the frame the failing check's NameError was raised in (None when the traceback does
    not end at the mutated line with a NameError, as when the function catches it). It names no test file, whose
    path a small model would copy instead of the footer's."""
    frame = last_frame(first_failure(xml, f2p[0], traceback=True), EASY_FRAME_LINES)
    if not frame.endswith(f"{m.path}:{m.line}: NameError"):
        return None
    return easy_statement(m.function, frame)


def easy_statement(function: str, frame: str) -> str:
    return f"A check of the test suite fails in `{function}`:\n\n```\n{frame}\n```\n\nFix it with one edit_line call."


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_task(
    pkg: Package,
    n: int,
    m: Mutation,
    f2p: list[str],
    p2p: list[str],
    repo: Path,
    xml: str,
    sha256: str,
    statement: str | None = None,
) -> SWETask:
    """The task of one kept mutation (diffs made with git in the host copy `repo` of the clean source)."""
    hidden = files_of_tests(f2p)
    (repo / m.path).write_text(m.source)
    for f in hidden:
        (repo / f).unlink()
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "buggy")
    try:  # the diffs from the buggy commit back to the clean one
        gold = git(repo, "diff", "--no-color", "HEAD", "HEAD~1", "--", m.path)
        test_patch = git(repo, "diff", "--no-color", "HEAD", "HEAD~1", "--", *hidden)
    finally:
        git(repo, "reset", "-q", "--hard", "HEAD~1")
    instance_id = f"{pkg.slug}-{'typo' if m.kind.startswith('typo') else 'bug'}{n}"
    task = SWETask(
        instance_id=instance_id,
        repo=pkg.repo,
        version=pkg.version,
        problem_statement=statement or problem_statement(pkg, f2p, repo, xml),
        patch=gold,
        test_patch=test_patch,
        FAIL_TO_PASS=f2p,
        PASS_TO_PASS=p2p,
        image_name=f"agentrl/swe:{instance_id}",
        image_build={
            "sdist": f"{pkg.name}=={pkg.version}",
            "sha256": sha256,
            "python_path": pkg.python_path,
            "test_requirements": TEST_REQUIREMENTS,
            "bug": {"file": m.path, "function": m.function, "line": m.line, "kind": m.kind},
        },
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = base_commit_of(base_tree(task, Path(tmp) / "base"))
    return task.model_copy(update={"base_commit": base})


async def tasks_of(
    pkg: Package, env_image: str, per_package: int, max_tries: int, work: Path, easy: bool = False
) -> list[SWETask]:
    sdist = fetch_sdist(f"{pkg.name}=={pkg.version}")
    sha256 = hashlib.sha256(sdist.read_bytes()).hexdigest()
    clean = unpack_sdist(sdist, work / pkg.name)
    subprocess.run(["bash", "-c", "git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm clean"],
                   cwd=clean, check=True)  # fmt: skip
    sandbox = await DockerSandbox.create(env_image, run_id="swe-build", cpus=2.0, memory="2g", exec_timeout_s=600)
    try:
        await sandbox.upload_dir(clean, "/work/testbed")
        suite = Suite(pkg, sandbox, clean)
        started = time.perf_counter()
        baseline, _ = await suite.run()
        suite.timeout = max(30.0, 10 * (time.perf_counter() - started))
        passing = {t for t, o in baseline.items() if o == Outcome.PASSED}
        log(f"{pkg.name}: {len(passing)}/{len(baseline)} tests pass on the clean source")
        inject = name_typos if easy else mutations
        candidates = [m for path in pkg.sources for m in inject(path, (clean / path).read_text())]
        random.Random(pkg.name).shuffle(candidates)
        tasks: list[SWETask] = []
        used: set[str] = set()
        tries = 0
        for m in candidates:
            if len(tasks) >= per_package or tries >= max_tries:
                break
            if f"{m.path}:{m.function}" in used:
                continue
            tries += 1
            outcomes, xml = await suite.try_mutation(m)
            broken = sorted(t for t in passing if outcomes.get(t) != Outcome.PASSED)
            files = files_of_tests(broken)
            ok = outcomes and 1 <= len(broken) <= MAX_F2P and len(files) <= MAX_HIDDEN_FILES
            statement = easy_problem_statement(pkg, broken, m, xml) if ok and easy else None
            ok = ok and (statement is not None or not easy)
            log(f"{pkg.name}: {m.function} ({m.kind}, line {m.line}): {len(broken)} tests break -> "
                f"{'kept' if ok else 'skipped'}")  # fmt: skip
            if not ok:
                continue
            used.add(f"{m.path}:{m.function}")
            p2p = sorted(t for t in passing if t.split("::")[0] in files and outcomes.get(t) == Outcome.PASSED)
            tasks.append(make_task(pkg, len(tasks) + 1, m, broken, p2p, clean, xml, sha256, statement))
        return tasks
    finally:
        await sandbox.close()


# ---- validation ----------------------------------------------------------------------------------------------


async def validate(task: SWETask) -> str | None:
    """None when the task is sound in its image, else what is wrong."""
    gold = await grade_patch(task, task.patch, run_id="swe-build")
    if not gold.resolved:
        return f"gold patch does not resolve it: {gold.details()['failing']} {gold.error or ''}"
    empty = await grade_patch(task, "", run_id="swe-build")
    if any(o == Outcome.PASSED for o in empty.fail_to_pass.values()):
        return "some FAIL_TO_PASS tests pass without a patch"
    if empty.p2p_fraction < 1.0:
        return f"PASS_TO_PASS tests fail without a patch: {empty.details()['failing']}"
    return None


async def main_async(args: argparse.Namespace) -> int:
    packages = MORE_PACKAGES if args.more else PACKAGES
    chosen = [p for p in packages if not args.only or p.name in args.only.split(",")]
    easy = args.tier == "easy" or args.more
    saved = cache_dir() / (
        "candidates-more.jsonl" if args.more else "candidates-easy.jsonl" if easy else "candidates.jsonl"
    )
    if args.revalidate:
        candidates = load_tasks(saved)
    else:
        with tempfile.TemporaryDirectory(prefix="agentrl-swe-build-") as tmp:
            env_image = build_recipe_image(env_context(TEST_REQUIREMENTS, Path(tmp) / "env"), "swe-env")
            jobs = asyncio.Semaphore(args.jobs)

            async def one(pkg: Package) -> list[SWETask]:
                async with jobs:
                    return await tasks_of(pkg, env_image, args.per_package, args.max_tries, Path(tmp), easy)

            candidates = [t for found in await asyncio.gather(*(one(p) for p in chosen)) for t in found]
        write_rows(candidates, saved)
    log(f"{len(candidates)} candidate tasks (saved in {saved}); building their images")
    build_task_images(candidates)
    limit = asyncio.Semaphore(args.jobs)

    async def check(task: SWETask) -> bool:
        async with limit:
            problem = await validate(task)
        log(f"validate {task.instance_id}: {problem or 'ok'}")
        return problem is None

    verdicts = await asyncio.gather(*(check(t) for t in candidates))
    valid = [t for t, ok in zip(candidates, verdicts, strict=True) if ok]
    held_out: dict[str, list[str]] = {}
    for task in valid:  # the first tasks of each package (their functions differ from every training task's)
        kept = held_out.setdefault(task.repo, [])
        if len(kept) < (args.held_out or (2 if easy else 1)):
            kept.append(task.instance_id)
    eval_ids = {i for ids in held_out.values() for i in ids}
    out = (HERE.parent / ("swe_explore" if args.more else "swe_easy" if easy else "swe_agent")) / "data"
    out.mkdir(exist_ok=True)
    write_rows([t for t in valid if t.instance_id not in eval_ids], out / "train.jsonl")
    write_rows([t for t in valid if t.instance_id in eval_ids], out / "eval.jsonl")
    log(f"{len(valid)}/{len(candidates)} tasks valid: {len(valid) - len(eval_ids)} train, {len(eval_ids)} eval")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-package", type=int, default=4, help="tasks kept per package")
    parser.add_argument("--max-tries", type=int, default=16, help="mutations tried per package")
    parser.add_argument("--only", default="", help="comma-separated package names (default: all)")
    parser.add_argument("--jobs", type=int, default=4, help="packages screened at once")
    parser.add_argument("--revalidate", action="store_true", help="validate the last run's candidates again")
    parser.add_argument("--tier", choices=["default", "easy"], default="default", help="easy: swe_easy's name typos")
    parser.add_argument("--more", action="store_true", help="MORE_PACKAGES' easy-tier bugs, for recipes/swe_explore")
    parser.add_argument("--held-out", type=int, default=0, help="tasks held out per package (default: 2 easy, 1)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
