"""Command line: `python -m icl train|sweep|...`. Bad input exits with status 2 and one line that
names the key, the value and what is allowed; no traceback."""
from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import re
import sys
from pathlib import Path

from ..core import config
from ..core.config import ConfigError, RunConfig, field_names, field_type
from ..core.memory import check_fits
from ..core.registry import MODELS
from .files import DISK_FULL, disk_full, free_bytes, stream_fd
from .files import write_json as write
from .paths import check_writable
from .workload import check_day, check_workload, size

# Subcommands: those of other modules define add_arguments(parser) and run(args); this module's own
# are in HANDLERS.
COMMANDS = {
    "train": ("icl.running.cli", "train one model on one task"),
    "sweep": ("icl.running.cli", "run every model a parameter file describes, through the run cache"),
    "reproduce": ("icl.running.reproduce", "run every notebook with papermill at a profile into outputs/"),
    "report": ("icl.running.report", "rewrite REPORT.md, claims.json and the README's results from outputs/, running nothing"),
    "golden": ("icl.running.golden", "write the ci-profile golden notebooks that nbval compares against"),
    "bound": ("icl.running.cli", "softmax, mixture and random-subspace bounds of the softmax model, no training"),
    "judge": ("icl.running.judge", "judge your own depth curves by the rule that judges C4 (inverse-depth decay)"),
}


DESCRIPTION = ("In-context learning with linear and softmax attention: train models, run sweeps through the run "
               "cache, execute the paper's notebooks, judge depth curves. Bad input exits with status 2 and one line.")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2, no usage dump
        raise ConfigError(f"{self.prog}: {message}")


def check_output_path(path: str | None, flag: str = "--json", need: int = 0, yes: bool = False,
                      inputs: tuple[str, ...] = ()) -> None:
    """ConfigError unless `path` can be written, holds none of `inputs` and has room for about
    `need` bytes (unless `yes`): checked before training, so no result is lost."""
    fd = 1 if path == "-" else stream_fd(path or "")
    if fd is not None and not os.path.exists(f"/dev/fd/{fd}"):  # a stream of this process: checked open,
        raise ConfigError(f"{flag}: {path} is not open (descriptor {fd} is closed); give a file path")
    if path is None or fd is not None:  # and written through itself (files.write_atomic): never probed in /dev
        return
    if not path.strip():
        raise ConfigError(f"{flag}: an empty path; give a file path (or '-' for standard output)")
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{flag}: {path} is a folder; give a file path (or '-' for standard output)")
    for name in inputs:
        if target.exists() and os.path.samefile(target, name):
            raise ConfigError(f"{flag}: {path} is the parameter file itself; give another path for the results")
    if not target.parent.is_dir():
        raise ConfigError(f"{flag}: {path} cannot be written; the folder {target.parent} does not exist (make it first, "
                          "or give another path)")
    check_writable(target.parent, flag, path, "give a writable path")
    if target.exists() and target.is_file():  # a device or a pipe is written as it is (files.write_atomic)
        try:
            open(target, "a").close()
        except OSError as err:
            raise ConfigError(f"{flag}: {path} is not writable ({err.strerror}); give a writable path") from None
    free = free_bytes(target.parent.resolve())
    if need > free and not yes:
        raise ConfigError(f"{flag}: the results need up to about {size(need)}, more than the {size(free)} free on the disk "
                          f"of {path}; free some space or give another path (--yes runs anyway, and a result that "
                          "cannot be written there goes to a fallback folder)")


def check_cache_path(path: str | None) -> None:
    """ConfigError for an empty --cache (Path("") is the working directory, which would fill with key
    folders) or one that names a file (each entry would read as damaged before the refusal)."""
    if path is not None and (not path.strip() or (os.path.exists(path) and not os.path.isdir(path))):
        raise ConfigError(f"--cache: {'an empty path' if not path.strip() else f'{path} is a file'}; give a folder "
                          "(e.g. outputs/runs)")


def write_json(obj, path: str, what: str = "the result") -> bool:
    """`obj` as JSON at `path` ('-': standard output), atomically; where it cannot be written there,
    somewhere else, said in one line (icl.running.files.write_json): never dropped. Whether it is at `path`."""
    if path == "-":
        print(json.dumps(obj, indent=1), flush=True)  # flushed here: a closed pipe (`| head`) is main's one line
        return True
    return write(obj, path, what) == Path(path)


def field_help() -> dict[str, str]:
    """Each RunConfig field's description: its comment in config.py, with the allowed values."""
    import inspect

    from ..core.attention import NONLINEARITIES  # heavy: loads torch, for a command's own --help only

    notes = {"steps": "training steps (one Adam update on a fresh batch each)",  # fields without a comment
             "warmup_fraction": "fraction of the steps spent in the linear warm-up, in [0, 1)",
             "seed": "seed of the training data stream and of the initial weights"}
    for line in inspect.getsource(RunConfig).splitlines():
        m = re.match(r"\s+(\w+): [\w.]+ = [^#]*#\s*(.*)", line)
        if m:
            notes[m.group(1)] = m.group(2).strip()
    choices = {"model": tuple(MODELS), "task": config.TASKS, "device": config.DEVICES,
               "schedule": config.SCHEDULES, "residual_scale": config.RESIDUAL_SCALES,
               "subspace": config.SUBSPACES, "nonlinearity": tuple(NONLINEARITIES)}
    out = {}
    for name in field_names():
        text = notes.get(name, "")
        if name in choices:
            text = (text + "; " if text and "|" not in text else "") + "one of " + ", ".join(choices[name])
        elif field_type(name) is bool:
            text = (text + "; " if text else "") + "true or false"
        out[name] = text
    return out


def add_config_flags(p: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """One flag per RunConfig field (or per field in `only`), dashes for underscores, with its
    description, allowed values and default in the help."""
    defaults, notes = RunConfig(), field_help()
    for name in only or field_names():
        kind = field_type(name).__name__
        p.add_argument("--" + name.replace("_", "-"), dest=name, default=argparse.SUPPRESS, metavar=kind.upper(),
                       help=f"{notes[name]} (default: {getattr(defaults, name)})".replace("%", "%%").lstrip())


def add_arguments_train(p: argparse.ArgumentParser) -> None:
    add_config_flags(p)
    p.add_argument("--json", metavar="PATH", help="write the result as JSON to PATH ('-' for standard output)")
    p.add_argument("--cache", metavar="DIR", help="read/write the run cache in DIR (default: no cache)")
    add_job_flags(p)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def add_job_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retry-diverged", action="store_true",
                   help="train again the runs the cache records as diverged (default: report them, train nothing)")
    p.add_argument("--yes", action="store_true", help="run a job estimated at more than a day of work, or "
                   "larger than the cache's free disk (default: refuse it; the estimate is printed before training)")


def report_diverged(results: list[dict]) -> int:
    """One line per diverged run (its config and step); the exit status: 1 if any diverged."""
    from .sweep import diverged  # heavy: loads torch and yaml

    lines = diverged(results)
    for line in lines:
        print(f"icl: {line}; recorded in the run cache (--retry-diverged trains it again)", file=sys.stderr)
    return 1 if lines else 0


def run_train(args) -> int:
    # heavy: sweep and train load torch; each command loads what it runs
    from ..core.train import train
    from .cache import RunCache
    from .files import json_bytes
    from .sweep import run_sweep

    values = {k: v for k, v in vars(args).items() if k in field_names()}
    cfg = RunConfig.from_dict(values, "train")
    check_cache_path(args.cache)
    check_output_path(args.json, need=json_bytes([cfg]), yes=args.yes)

    if args.cache:
        cache = RunCache(args.cache, args.retry_diverged)
        result = run_sweep([cfg], cache, progress=not args.no_progress,
                           confirm=lambda todo: check_workload(todo, args.yes, cache.root))[0]
        if report_diverged([result]):
            return 1
    else:
        check_fits(cfg)  # run_sweep checks this (and the cache) itself
        check_workload([[cfg]], args.yes)
        result = train(cfg, progress=not args.no_progress)
    stored = args.json is None or write_json(result, args.json)
    print(f"{cfg.model} {cfg.task} depth {cfg.depth}: relative loss {result['initial_loss']:.4f} -> "
          f"{result['final_loss']:.4f} in {result['wall_seconds']:.1f} s", file=sys.stderr)
    return 0 if stored else 1


def add_arguments_sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("params", metavar="PARAMS.yaml", help="sweep file: RunConfig keys, plus depths, seeds, "
                   "models, learning_rates, top_ks (lists) and spectra (list of [input_exponent, task_exponent])")
    p.add_argument("--cache", metavar="DIR", default="outputs/runs", help="run cache folder (default: outputs/runs)")
    p.add_argument("--json", metavar="PATH", help="write {'runs': [...]} as JSON to PATH ('-' for standard output)")
    p.add_argument("--executor", choices=("local", "submitit-local", "slurm"), default="local",
                   help="where the runs execute (default: local, in this process)")
    add_job_flags(p)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    # The options that matter most live in the file, so the help lists them too, one a line.
    defaults = RunConfig()
    notes = field_help()
    keys = "\n".join(f"  {name:<20} {notes[name]} (default: {getattr(defaults, name)})" for name in field_names())
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = ("keys of PARAMS.yaml (any RunConfig field; unknown keys are an error):\n" + keys +
                "\nlists that sweep an axis: depths, seeds, models, learning_rates, top_ks, "
                "spectra ([[input_exponent, task_exponent], ...])")


def run_sweep_command(args) -> int:
    # heavy: sweep loads torch and yaml; each command loads what it runs
    from ..core.expansion import expand
    from .cache import RunCache
    from .files import json_bytes
    from .sweep import read_yaml, run_sweep

    cfgs = expand(read_yaml(args.params), args.params)
    check_cache_path(args.cache)
    check_output_path(args.json, need=json_bytes(cfgs), yes=args.yes, inputs=(args.params,))
    cache, runner, confirm = RunCache(args.cache, args.retry_diverged), None, None
    if args.executor != "local":  # a cluster's time is not this machine's: no estimate
        from .cluster import submitit_runner  # heavy: loads torch

        runner = submitit_runner(args.executor, Path(args.cache) / "submitit", cache=cache)
    else:
        confirm = lambda todo: check_workload(todo, args.yes, cache.root)  # noqa: E731
    results = run_sweep(cfgs, cache, progress=not args.no_progress, runner=runner, confirm=confirm)
    stored = args.json is None or write_json({"runs": results}, args.json, f"the JSON of {len(results)} runs")
    diverged = report_diverged(results)
    done = f"{len(results)} runs done" if not diverged else f"{len(results)} runs: the diverged above, the others done"
    print(f"{done}; results in {args.cache}", file=sys.stderr)
    return diverged or (0 if stored else 1)


# ---------------------------------------------------------------- `python -m icl bound`
# (bounds loads torch and scipy, hence imported in the functions: `--help` needs neither)


def add_arguments_bound(p: argparse.ArgumentParser) -> None:
    from ..analysis.bounds import BOUND_KEYS  # heavy: loads torch and scipy

    add_config_flags(p, only=BOUND_KEYS)
    p.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
                   help="depths of the subspace ensembles (default: 1 2 4 ... 64)")
    p.add_argument("--fit-contexts", type=int, default=2048, help="contexts the betas and readouts are fitted on")
    p.add_argument("--json", metavar="PATH", help="write the bounds as JSON to PATH ('-' for standard output)")
    p.add_argument("--eval-sets", type=int, default=0, metavar="N",
                   help="also score both bounds on N other evaluation sets and print their spread (default: 0)")
    p.add_argument("--yes", action="store_true", help="run even where the evaluation sets are estimated at more than a day")


def run_bound(args) -> int:
    from ..analysis import baselines  # heavy: baselines and bounds load torch and scipy
    from ..analysis.bounds import BOUND_KEYS, bounds, check_bound_fits, held_out_spread

    values = {k: v for k, v in vars(args).items() if k in BOUND_KEYS}
    cfg = RunConfig.from_dict(values, "bound")
    if min(args.depths) < 1 or max(args.depths) > 4096:
        raise ConfigError(f"depths: {args.depths} is not allowed; every depth must be between 1 and 4096")
    if args.eval_sets < 0 or args.eval_sets == 1:
        raise ConfigError(f"eval-sets: {args.eval_sets} is not allowed; it must be 0 or at least 2")
    if args.fit_contexts < 16:
        raise ConfigError(f"fit-contexts: {args.fit_contexts} is not allowed; it must be >= 16")
    check_output_path(args.json)
    check_bound_fits(cfg, args.depths, args.fit_contexts)  # before the contexts are drawn
    if args.eval_sets:  # timed first: the estimate is printed, or a refusal for its size given, before any work
        from .timing import eval_set_seconds  # heavy: loads torch

        check_day(args.eval_sets * eval_set_seconds(cfg, args.fit_contexts), args.yes, f"{args.eval_sets:,} evaluation "
                  f"sets of {cfg.eval_contexts:,} contexts on this machine", "give fewer --eval-sets or eval_contexts")
    spread = held_out_spread(cfg, args.eval_sets, args.fit_contexts) if args.eval_sets else None
    if max(args.depths) > 64:  # deeper than the default: the subspace ensembles ran silent for up to minutes
        print(f"icl: the bounds and subspace ensembles at depths up to {max(args.depths)}: this may take minutes",
              file=sys.stderr)
    out = bounds(cfg, args.depths, args.fit_contexts)
    stored = args.json is None or write_json(out, args.json)
    curves = "; ".join(f"{kind.replace('_', ' ')}s of rank {out['key_dim']}: "
                       + ", ".join(f"{L}: {v:.3f}" for L, v in out[kind].items())
                       for kind in baselines.KINDS if kind in out)
    print(f"softmax bound {out['single']:.4f} (beta {out['beta']:.3g}), mixture bound {out['mixture']:.4f}, "
          f"linear {out['linear']:.4f}; {curves} ({out['seconds']:.1f} s)", file=sys.stderr)
    if spread:
        print(f"over {args.eval_sets} other evaluation sets of {cfg.eval_contexts}: " + "; ".join(
            f"{name} {spread[k]['mean']:.4f} (relative std {spread[k]['relative_std']:.2%}, range "
            f"{spread[k]['relative_range']:.2%})" for k, name in (("single", "softmax bound"), ("mixture", "mixture bound")))
            + f"; mixture below softmax by {spread['relative_gain']['mean']:.2%} on average "
              f"({spread['relative_gain']['min']:.2%} to {spread['relative_gain']['max']:.2%})", file=sys.stderr)
    return 0 if stored else 1


HANDLERS = {"train": (add_arguments_train, run_train), "sweep": (add_arguments_sweep, run_sweep_command),
            "bound": (add_arguments_bound, run_bound)}


def build_parser(commands=None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `commands` (None: all). Each command's arguments come from
    its module, which may load torch: `icl --help` and a command's own run load only what they need."""
    parser = Parser(prog="icl", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if commands is None or name in commands:
            handler(name, module)[0](p)
    return parser


def handler(name: str, module: str):
    if module == "icl.running.cli":
        return HANDLERS[name]
    mod = importlib.import_module(module)
    return mod.add_arguments, mod.run


WRITABLE = "run where icl may write (the checkout, outputs/, the cache)"
FILE_ERRORS = {errno.EACCES: WRITABLE, errno.EPERM: WRITABLE, errno.EROFS: WRITABLE,  # errors whose one line says
               errno.ENAMETOOLONG: "give a shorter path", errno.ENOTDIR: "a file stands where a folder must be"}  # it all
MAX_ERROR = 1_000  # characters of an error line: the messages bound each value they show (config.excerpt)


def clip(message: str) -> str:
    """One line of at most MAX_ERROR characters, whatever a message holds."""
    line = " ".join(message.split("\n"))
    return line if len(line) <= MAX_ERROR else f"{line[:MAX_ERROR - 200]} ... {line[-190:]}"


def main(argv: list[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser([a for a in argv if a in COMMANDS][:1]).parse_args(argv)
        return handler(args.command, COMMANDS[args.command][0])[1](args)
    except ConfigError as err:
        print(f"icl: error: {clip(str(err))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of standard output left (`| head -c 10`): nothing more to say there
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush would raise again
        return 1
    except OSError as err:  # a file icl could not create or read (a read-only checkout): no traceback
        if disk_full(err):  # wherever it struck, with or without a file name
            print(f"icl: error: {DISK_FULL}" + (f" (writing {err.filename})" if err.filename else ""), file=sys.stderr)
            return 2
        if err.filename is None or err.errno not in FILE_ERRORS:
            raise
        print(f"icl: error: {clip(f'{err.filename}: {err.strerror}; {FILE_ERRORS[err.errno]}')}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # a DivergenceError (icl.core.train, which loads torch: not imported here), or
        if type(err).__name__ == "BrokenProcessPool":  # a notebook's worker killed (kill -9, out of memory)
            err = "a worker process was killed; finished runs are in the cache, a rerun resumes"
        elif type(err).__name__ != "DivergenceError":
            raise
        print(f"icl: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("icl: interrupted; finished runs are in the cache, a rerun resumes", file=sys.stderr)
        return 130


def run() -> None:  # the `icl` console command ([project.scripts])
    sys.exit(main())
