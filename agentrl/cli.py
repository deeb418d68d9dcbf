"""The `agentrl` command line: train | rollout | eval | serve | gateway | check | sandbox | model | config | view.

User mistakes (`agentrl.errors.UserError`: bad config, missing files, unknown names) print one clear message and
exit with status 2 (set AGENTRL_DEBUG=1 to see the traceback too). Infrastructure failures (`InfrastructureError`:
a server, sandbox or weight sync that broke) and bugs keep their traceback and exit with status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentrl.errors import InfrastructureError, UserError

if TYPE_CHECKING:
    from agentrl.loops.conformance.case import LoopCheckCase

EXIT_USAGE = 2
EXIT_FAILURE = 1

OVERRIDES_HELP = "recipe=NAME and dotted key=value overrides, e.g. trainer.steps=20 rollout.n=4"


def _cmd_config(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from agentrl.config import load_config
    from agentrl.loops.hooks import environment_form

    overrides = args.overrides[1:] if args.overrides[:1] == ["show"] else args.overrides  # `show` may be left out
    cfg = load_config(overrides=overrides)  # shows the config; `train` and `rollout` check the names
    print(f"# environment: {environment_form(cfg)}")
    print(OmegaConf.to_yaml(cfg.model_dump(by_alias=True, mode="json")), end="")
    return 0


def _cmd_model(args: argparse.Namespace) -> int:
    from agentrl import models

    if args.action == "prepare":
        print(models.prepare_default_model(cache_dir=args.cache_dir, force=args.force))
    else:
        print(models.resolve_model(args.model, cache_dir=args.cache_dir, prepare=False))
    return 0


def _cmd_sandbox(args: argparse.Namespace) -> int:
    from agentrl.sandbox import images

    print(images.build_base_image(force=args.force))
    return 0


def _cmd_rollout(args: argparse.Namespace) -> int:
    from agentrl.config import load_config
    from agentrl.loops.preflight import validate_episodes

    cfg = load_config(overrides=args.overrides)
    validate_episodes(cfg)  # every name checked before the heavy imports
    from agentrl.runner import run_rollout

    run_rollout(cfg)
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from agentrl.config import load_config
    from agentrl.trainer.preflight import validate_run

    cfg = load_config(overrides=args.overrides)
    validate_run(cfg)  # every name checked before torch and the model load
    from agentrl.trainer.loop import train

    train(cfg, checked=True)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from agentrl.evaluate import run_eval_from_overrides

    run_eval_from_overrides(args.overrides)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from agentrl.rollout.serve import serve_from_overrides

    return serve_from_overrides(args.overrides)


def _cmd_gateway(args: argparse.Namespace) -> int:
    from agentrl.gateway.serve import serve_gateway_from_overrides

    return serve_gateway_from_overrides(args.overrides)


def _cmd_check(args: argparse.Namespace) -> int:
    """`agentrl check loop=NAME [recipe=R [task=ID]] [tokenizer=MODEL] [key=value ...]`: 0 when the loop keeps the
    loop contract, 1 with one line per broken property, 2 when no episode could be played (what to give said).
    With recipe=R it plays R's first training task (or task=ID) with R's tools, sandbox and environment, the other
    settings going over R's (`load_config`); without, the loop's own check case, the settings over its config."""
    from agentrl.loops.conformance.check import loop_problems

    options = dict(_key_value(item) for item in args.overrides)
    loop, recipe, task, model = (options.pop(key, None) for key in ("loop", "recipe", "task", "tokenizer"))
    if loop is None:
        raise UserError("agentrl check needs loop=NAME: a registered loop (e.g. single_turn) or module:Class")
    case, config = _check_case(loop, recipe, task, [f"{key}={value}" for key, value in options.items()])
    tokenizer = None
    if model is not None or recipe is not None:
        from agentrl.models import load_tokenizer, resolve_model

        tokenizer = load_tokenizer(resolve_model(model or case.config.get("model", "default")))
    name, problems = loop_problems(loop, tokenizer, case, config)
    if problems and all(problem.startswith("play: ") for problem in problems):
        raise UserError(_unplayed(name, recipe, problems))
    for problem in problems:
        print(problem)
    print(f"{name}: {'breaks' if problems else 'keeps'} the loop contract", file=sys.stderr)
    return EXIT_FAILURE if problems else 0


def _check_case(
    loop: str, recipe: str | None, task: str | None, dotted: list[str]
) -> tuple[LoopCheckCase, dict[str, Any] | None]:
    """The case `agentrl check` plays and the settings over it: the recipe's (`recipe_case`), or the loop's own."""
    from omegaconf import OmegaConf

    from agentrl.loops.base import get_loop_class
    from agentrl.loops.conformance.recipe import missing_recipe, recipe_case

    cls = get_loop_class(loop)
    if recipe is not None:
        return recipe_case(cls, loop, recipe, dotted, task), None
    if task is not None:
        raise UserError(f"task={task} picks one of a recipe's training tasks: give recipe=R too")
    case = cls.check_case()
    if case.lacks:
        raise UserError(missing_recipe(loop, case))
    return case, OmegaConf.to_container(OmegaConf.from_dotlist(dotted)) if dotted else None  # type: ignore[return-value]


def _unplayed(name: str, recipe: str | None, problems: list[str]) -> str:
    """What `agentrl check` says when the check episode could not be played: nothing was checked."""
    from agentrl.loops.conformance.recipe import CHECK_RECIPES

    if recipe is not None:
        give = f"fix what it says in recipe {recipe}'s settings (key=value) or the loop"
    elif name in CHECK_RECIPES:
        give = f"fix what it says, or check the loop with its recipe: recipe={CHECK_RECIPES[name]}"
    else:
        give = "fix what it says, or give a recipe whose training tasks the loop plays: recipe=R"
    return f"{name}: no check episode could be played, so nothing was checked: {give}\n  " + "\n  ".join(problems)


def _key_value(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep:
        raise UserError(f"expected key=value, got {item!r} (e.g. loop=single_turn)")
    return key, value


def _cmd_view(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentrl.viewer import build_viewer, serve

    tokenizer = None if args.tokenizer in ("none", "") else args.tokenizer
    page = build_viewer(Path(args.run_dir), Path(args.out) if args.out else None, tokenizer=tokenizer)
    print(f"viewer written to {page}")
    if args.serve:
        serve(page, args.port)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentrl.reports import write_report

    print(f"report written to {write_report(Path(args.run_dir))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl", description="Reinforcement learning for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_: str, handler: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    for name, help_, handler in [
        ("train", "train a policy on a recipe", _cmd_train),
        ("rollout", "run the agent loop over a recipe's data and save trajectories", _cmd_rollout),
        ("eval", "evaluate a policy on a recipe's held-out data", _cmd_eval),
        ("serve", "start a rollout server: backend=hf|vllm|sglang model=... port=...", _cmd_serve),
        ("gateway", "serve a policy to any OpenAI-speaking agent, recording its sessions", _cmd_gateway),
    ]:
        add(name, help_, handler).add_argument("overrides", nargs="*", help=OVERRIDES_HELP)

    check = add("check", "check an agent loop against the loop contract: loop=NAME [recipe=R]", _cmd_check)
    check.add_argument(
        "overrides",
        nargs="*",
        help="loop=NAME (registered, or module:Class), recipe=R (play its first training task), task=ID (another "
        "of its tasks), tokenizer=MODEL, key=value settings",
    )

    view = add("view", "build the HTML viewer of a run directory", _cmd_view)
    view.add_argument("run_dir", help="run directory, folder of runs, or trajectories .jsonl(.gz) file")
    view.add_argument("--out", default=None, help="HTML file (or folder) to write; default RUN_DIR/index.html")
    view.add_argument("--tokenizer", default="auto", help="auto (the run's model), none, or a model")
    view.add_argument("--serve", action="store_true", help="also serve the page on http://127.0.0.1:PORT/")
    view.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")

    report = add("report", "(re)write report.md and report/*.png of a training run directory", _cmd_report)
    report.add_argument("run_dir", help="the run's output_dir (with metrics.jsonl)")

    config = add("config", "show the resolved configuration", _cmd_config)
    config.add_argument("overrides", nargs="*", metavar="[show] overrides", help=OVERRIDES_HELP)

    model = add("model", "prepare or locate models", _cmd_model)
    model.add_argument("action", choices=["prepare", "path"])
    model.add_argument("model", nargs="?", default="default", help="model for `path` (default: default)")
    model.add_argument("--force", action="store_true", help="convert again even if prepared")
    model.add_argument("--cache-dir", default=None, help="model cache (default ~/.cache/agentrl/models)")

    sandbox = add("sandbox", "build the offline sandbox base image", _cmd_sandbox)
    sandbox.add_argument("action", choices=["build"])
    sandbox.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that servers, sandboxes and Ray are shut down as on Ctrl-C."""


def _raise_terminated(signum: int, frame: object) -> None:
    """SIGTERM's handler: `Terminated`, raised as `_raise_in_loop` does."""
    _raise_in_loop(Terminated)


def _raise_interrupted(signum: int, frame: object) -> None:
    """SIGINT's handler: `KeyboardInterrupt`, raised as `_raise_in_loop` does."""
    _raise_in_loop(KeyboardInterrupt)


def _raise_in_loop(exc: type[BaseException]) -> None:
    """Raise `exc`; inside a running event loop, from the loop's next callback instead of here.

    A signal handler runs between any two bytecodes of the main thread, finalizers included. An exception it raises
    inside a `__del__` (an asyncio transport's, say) is printed as "Exception ignored" and lost, and the process
    served on after SIGTERM (seen with `agentrl gateway` on a GPU machine). asyncio's own SIGINT handler cancels the
    main task instead, and a cancellation can be dropped on its way (Python 3.11's `wait_for` drops one that lands
    as the awaited call completes; `agentrl rollout` once ran on to the end after Ctrl-C). Raised from a loop
    callback, the exception always leaves `asyncio.run`, which then cancels the tasks and runs their cleanup."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise exc from None
    loop.call_soon_threadsafe(_raise, exc)


def _raise(exc: type[BaseException]) -> None:
    raise exc


def _stop_cleanly_on_signals() -> None:
    """A bare SIGTERM (a job scheduler's, `kill`'s) kills the process without unwinding it, and the rollout
    servers it started live on as orphans; turn it, and SIGINT, into exceptions that always stop the event loop.
    A handler already set is kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    # A blocked signal mask is inherited through fork and exec: a parent that blocked SIGINT (Ray blocks it in the
    # processes it starts) would leave Ctrl-C pending here forever
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupted)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `agentrl` command."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spinning OpenMP threads stall busy CPUs
    if os.getcwd() not in sys.path:  # dotted paths of user loops/tools resolve from the working directory
        sys.path.insert(0, os.getcwd())
    args = build_parser().parse_args(argv)
    _stop_cleanly_on_signals()
    try:
        return args.handler(args)
    except UserError as exc:
        if os.environ.get("AGENTRL_DEBUG"):
            raise
        print(f"agentrl {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InfrastructureError as exc:
        traceback.print_exc()
        print(f"agentrl {args.command}: infrastructure failure: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
