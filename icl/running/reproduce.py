"""`python -m icl reproduce` runs every notebook with papermill at a profile's parameters and
gathers the claim verdicts into REPORT.md; `python -m icl golden` writes the ci-profile copies
in tests/golden/ that nbval compares against.

Before any notebook starts, the device and every notebook's parameters are checked (the same
checks the notebook's own parameters cell makes), so a bad value stops in one line. A notebook
executes into a staging folder next to its outputs and replaces `outputs/<name>/` only when it
completes (icl.running.staging): a killed or failed run leaves the previous outputs whole, and REPORT.md
(icl.running.report) says that the last run failed. With `--jobs N`, independent notebooks run in N
processes at once, one thread each; a notebook starts only after those it reads (`NEEDS`) have
finished. Its workers and kernels end with it, and the next run of the profile waits for them
(icl.running.processes).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from contextlib import contextmanager, suppress
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from ..core.config import DEVICES, EXCERPT, ConfigError, excerpt
from ..core.suggest import did_you_mean
from ..core.train import resolve_device
from . import paths, plan, processes
from .files import DISK_FULL, NotAnEntry, disk_full, read_regular
from .parameters import NEEDS, NOTEBOOKS, PROFILES, check_parameters, chosen, declared_parameters, notebook_parameters, profile_root  # noqa: F401 (NOTEBOOKS: read as reproduce.NOTEBOOKS)
from .paths import repo_root
from .plan import SMOKE
from .processes import cores
from .report import write_report
from .staging import check_destinations, destinations, publish, readable_timings, record_times, report_folder, staging_folder, staging_paths
from .sweep import load_yaml

# The kernel draws with the inline backend whatever MPLBACKEND the caller has (Agg would leave
# the executed notebooks without figures); icl.analysis.plots.style() switches to it as well.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def execute(root: Path, name: str, params: dict, out: Path, connection: Path) -> None:
    """papermill; the kernel's connection file (which holds its key) at `connection`, not in /tmp,
    where a killed run would leave it."""
    import papermill
    from traitlets.config import Config

    papermill.execute_notebook(str(root / "notebooks" / f"{name}.ipynb"), str(out), parameters=params,
                               kernel_name="python3", cwd=str(root / "notebooks"), progress_bar=False,
                               config=Config({"KernelManager": {"connection_file": str(connection)}}))
    relative_paths(out, root)


def relative_paths(notebook: Path, root: Path) -> None:
    """papermill records the absolute input and output paths; a committed notebook should not
    carry the layout of the machine that ran it, so they become relative to the repository. What
    changes on every execution of unchanged code goes too (timestamps, durations, the random id of
    papermill's injected cell), so that a diff of an executed notebook means something."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    meta = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if meta.get(key) and Path(meta[key]).is_absolute():
            meta[key] = os.path.relpath(meta[key], root)
    for m in [meta] + [c.metadata.get("papermill", {}) for c in nb.cells]:
        for key in ("start_time", "end_time", "duration"):
            m.pop(key, None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
    nbformat.write(nb, notebook)


def run_notebook(root: str, name: str, params: dict, env: dict) -> dict:
    """Execute one notebook into its staging folder and publish it if it completes. Runs in a
    worker process with --jobs; returns {"seconds", "runs_trained", "status", "error", "log"}."""
    from papermill.exceptions import PapermillExecutionError

    root = Path(root)
    where = staging_paths(root, params, name)
    paths.remove_own(where["stage"])  # what a killed run left (run_all checked that icl made it)
    paths.make_own(where["stage"], name, params.get("profile", ""))
    for key in ("log", "stored", "connection"):
        where[key].unlink(missing_ok=True)
    staged = {**params, "output_dir": os.path.relpath(where["stage"], root)}
    out = where["stage"] / f"{name}.ipynb"
    start = time.perf_counter()
    result = {"status": "ok"}
    kernel_log = where["log"].with_suffix(".kernel.log")
    try:
        with kernel_environment({**env, "ICL_CACHE_STORE_LOG": str(where["stored"])}, kernel_log):
            execute(root, name, staged, out, connection=where["connection"])
    except PapermillExecutionError as err:
        cause = (err.evalue or "").strip().splitlines()
        result = {"status": "failed", "ename": err.ename,
                  "error": f"{err.ename}: {cause[0] if cause else ''} (in cell [{err.exec_count}])"}
        write_log(where["log"], str(err))
    except Exception as err:  # the kernel died, a file could not be written, ...
        import traceback

        result = {"status": "failed", "ename": type(err).__name__, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
        write_log(where["log"], traceback.format_exc())
    if result["status"] == "failed" and disk_full(result["error"]):
        result["error"] = f"no space left on the disk ({result['error']})"
    result["seconds"] = round(time.perf_counter() - start, 1)
    stored = where["stored"].read_text().split() if where["stored"].exists() else []
    where["stored"].unlink(missing_ok=True)
    result["runs_trained"] = len(stored) if params.get("cache_dir") else None
    if result["status"] == "ok":
        result["warnings"] = kernel_warnings(kernel_log, out)
        kernel_log.unlink(missing_ok=True)
        publish(root, where)
    else:
        result["log"] = os.path.relpath(where["log"], root)
        if out.exists():
            result["notebook"] = os.path.relpath(out, root)
    return result


@contextmanager
def kernel_environment(env: dict, kernel_log: Path):
    """`env` in os.environ, which the kernel papermill starts inherits, and standard error into
    `kernel_log`: the kernel writes its own warnings there, so that the terminal shows one start and
    one end line per notebook. Both as they were afterwards."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    sys.stderr.flush()
    saved_fd, sink = os.dup(2), os.open(kernel_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(sink, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd), os.close(sink)
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def kernel_warnings(kernel_log: Path, notebook: Path | None = None) -> list[str]:
    """icl's warnings (runs the cache could not take, say) among what a notebook's kernel wrote to
    standard error, each once: shown in the terminal, not only in the executed notebook."""
    try:
        text = read_regular(kernel_log, 2**20, errors="replace")
    except (OSError, NotAnEntry):
        text = ""
    lines = (text + stderr_of(notebook)).splitlines()
    return list(dict.fromkeys(line for line in lines if line.startswith("icl: warning:")))


def stderr_of(notebook: Path | None) -> str:
    """What an executed notebook's cells wrote to standard error (ipykernel puts it in the notebook,
    not in the kernel's log); nothing where it cannot be read as a notebook."""
    try:
        cells = json.loads(read_regular(notebook, 2**26, errors="replace"))["cells"]
        texts = [o.get("text", "") for c in cells for o in c.get("outputs", [])
                 if o.get("output_type") == "stream" and o.get("name") == "stderr"]
        return "".join("".join(t) if isinstance(t, list) else t for t in texts)  # on disk, a text is a list of lines
    except (OSError, NotAnEntry, ValueError, KeyError, TypeError, AttributeError):
        return ""


def write_log(path: Path, text: str) -> None:
    """The notebook's traceback, then what its kernel wrote to standard error."""
    kernel = path.with_suffix(".kernel.log")
    extra = kernel.read_text(errors="replace") if kernel.exists() else ""
    with suppress(OSError):  # a full disk: the run's one-line error still reaches the terminal
        path.write_text(re.sub(r"\x1b\[[0-9;]*m", "", text + ("\n--- kernel's standard error ---\n" + extra if extra else "")))


def hold_lock(root: Path, profile: str):
    """The profile's lock (processes.hold_lock): held until the returned file is closed."""
    return processes.hold_lock(staging_folder(root / profile_root(profile)), f"icl reproduce --profile {profile}")


def check_overrides(root: Path, names: list[str], overrides: dict) -> None:
    """ConfigError for a -p key that none of `names` declares (the run and --plan alike)."""
    declared = {k for n in names for k in declared_parameters(root, n)}
    unknown = sorted(set(overrides) - declared)
    if unknown:
        raise ConfigError(f"unknown parameter {excerpt(unknown[0])} for {', '.join(names)}{did_you_mean(unknown[0], declared)}")


def checked_parameters(root: Path, profile: str, names: list[str], device: str | None, jobs: int,
                       overrides: dict | None, own: dict[str, dict] | None) -> dict[str, dict]:
    """Every notebook's parameters, checked before anything runs: no override that no notebook
    declares, the device, every notebook's own checks, and where each will write."""
    threads = 1 if jobs > 1 else None
    check_overrides(root, names, overrides or {})
    params = {n: notebook_parameters(root, profile, n, device, {**(overrides or {}), **(own or {}).get(n, {})}, threads)
              for n in names}
    for n in names:  # the device first: a missing GPU is the most common stop
        resolve_device(params[n].get("device", "auto"))  # ConfigError: cuda asked for, none available
    for n in names:
        check_parameters(root, n, params[n])
    check_destinations(root, params)
    return params


def dependency_order(names: list[str]) -> tuple[dict[str, list[str]], TopologicalSorter]:
    """What each of `names` reads among them (`NEEDS`), and the standard library's scheduler of that
    graph (what is ready, what is done); ConfigError for a cycle, before any parameter is checked."""
    needs = {n: [d for d in NEEDS.get(n, ()) if d in names] for n in names}
    order = TopologicalSorter(needs)
    try:
        order.prepare()
    except CycleError as err:
        raise ConfigError(f"NEEDS: {', '.join(dict.fromkeys(err.args[1]))} wait for each other; the dependencies "
                          "must not form a cycle") from None
    return needs, order


def hold_locks(root: Path, profile: str, params: dict[str, dict]) -> list:
    """The profile's lock, and one per output folder beside the profile's: two runs of other profiles
    into one -p output_dir would otherwise stage and publish over each other. Held while the list lives."""
    folders = {staging_paths(root, p, n)["stage"].parent for n, p in params.items()} - {staging_folder(root / profile_root(profile))}
    return [hold_lock(root, profile)] + [processes.hold_lock(f, f"icl reproduce into {paths.shown(f.parent, root)}")
                                         for f in sorted(folders)]


def say_finished(tag: str, result: dict, out: Path, log) -> None:
    """The line (and the kernel's warnings) of a notebook that finished, well or not; `out`: its
    executed copy."""
    if result["status"] != "ok":
        log(f"{tag} FAILED after {result['seconds']:.0f} s: {result['error']}")
        return
    trained = "no run cache" if result["runs_trained"] is None else f"{result['runs_trained']} runs trained"
    log(f"{tag} done in {result['seconds']:.0f} s ({trained}) -> {out}")
    for line in result.get("warnings", []):  # said inside the kernel: a full cache, say
        log(f"{tag}: {line}")


def run_all(root: Path, profile: str, names: list[str], device: str | None, jobs: int = 1,
            overrides: dict | None = None, log=print, own: dict[str, dict] | None = None, yes: bool = False) -> dict[str, dict]:
    """Run notebooks (in dependency order, up to `jobs` at once); each one's result by name.
    `own`: parameters per notebook on top of `overrides` (a smoke run's output folders). Refused
    above a day of estimated training unless `yes` (`plan.check_work`)."""
    needs, order = dependency_order(names)
    params = checked_parameters(root, profile, names, device, jobs, overrides, own)
    cost = plan.check_work(root, profile, names, params, yes)  # seconds of what is left to train, per notebook
    locks = hold_locks(root, profile, params)  # noqa: F841 (held until this function returns)
    registry = root / profile_root(profile) / ".staging" / ".processes"  # where workers and kernels register
    env = {"MPLBACKEND": INLINE_BACKEND, processes.REGISTRY_ENV: str(registry), **(ONE_THREAD if jobs > 1 else {})}
    tag = {n: f"[{i}/{len(names)}] {n}" for i, n in enumerate(names, 1)}
    first = {n: i for i, n in enumerate(plan.critical_first(names, cost, NEEDS) if jobs > 1 else names)}
    results: dict[str, dict] = {}
    ready, running = [], {}
    pool = processes.worker_pool(jobs, registry)
    try:
        while order.is_active():
            ready = sorted([*ready, *order.get_ready()], key=first.get)
            while ready and len(running) < jobs:
                n = ready.pop(0)
                failed = [d for d in needs[n] if results[d]["status"] != "ok"]
                if failed:
                    results[n] = {"status": "failed", "seconds": 0.0, "runs_trained": None,
                                  "error": f"not run: {failed[0]}, which it reads, failed"}
                    log(f"{tag[n]} not run: {failed[0]} failed")
                    order.done(n)
                else:
                    left = cost.get(n, 0.0)  # its estimate first, as train's
                    log(f"{tag[n]} ({profile}) started"
                        + (f": about {plan.duration(left)} of training left on this machine" if left > 60 else ""))
                    running[pool.submit(run_notebook, str(root), n, params[n], env)] = n
            if not running:  # only notebooks not run: what they held back is ready now
                continue
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in finished:
                n = running.pop(f)
                results[n] = f.result()
                order.done(n)
                say_finished(tag[n], results[n], Path(params[n]["output_dir"]) / f"{n}.ipynb", log)
    finally:
        pool.shutdown(cancel_futures=True)
        for n, p in params.items():  # the key (0600) of a kernel whose worker was killed (kill -9) stays in staging
            staging_paths(root, p, n)["connection"].unlink(missing_ok=True)
    return results


def add_arguments(p) -> None:
    p.add_argument("--profile", default="quick", choices=PROFILES, help="the parameter set (default: quick)")
    p.add_argument("--device", default="auto", choices=DEVICES, help="where to train (default: auto)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these notebooks (e.g. 03_difficult)")
    p.add_argument("--jobs", type=int, default=cores(), metavar="N",
                   help="notebooks run at once, in separate processes of one thread each "
                        f"(default: the number of cores, {cores()}); 1 runs them one after another")
    p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("KEY", "VALUE"), default=[],
                   help="set a parameter (a YAML value) of every notebook that declares it, as papermill -p does")
    p.add_argument("--yes", action="store_true", help="run even where the estimate is more than a day of training")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--plan", action="store_true",
                      help="print, without training, each notebook's runs, steps, largest memory and estimated time")
    what.add_argument("--smoke", action="store_true",
                      help=f"run every notebook at the profile's shapes for {SMOKE['steps']} steps with small evaluation "
                           "sets, into "
                           "outputs/smoke/PROFILE/ (every code path, a fraction of the time)")
    p.add_argument("--outputs", metavar="DIR",
                   help="write every notebook's folder, REPORT.md, claims.json and timings.json under DIR (inside "
                        "outputs/ or $ICL_OUTPUT_ROOT) instead of the profile's folder; e.g. a run under another "
                        "CPU variant, to compare with scripts/compare_runs.py")


def run(args) -> int:
    if args.jobs < 1:
        raise ConfigError(f"jobs: {args.jobs} is not allowed; it must be an integer >= 1")
    names = chosen(args.only, args.profile)
    resolve_device(args.device)  # first (a plan too: it times real steps): a missing GPU is the most common stop
    overrides = {}
    for key, value in args.parameter:  # a YAML value, its aliases bounded (a short one can expand to gigabytes)
        overrides[key] = load_yaml(value, f"-p {key if len(key) <= EXCERPT else excerpt(key)}")

    root, say = repo_root(), lambda line: print(line, file=sys.stderr, flush=True)
    check_overrides(root, names, overrides)
    if args.plan:
        plan.plan(root, args.profile, names, args.device, overrides, log=say)
        return 0
    own, where = destinations(root, args.profile, names, args.smoke, args.outputs)
    start = time.perf_counter()
    try:
        times = run_all(root, args.profile, names, args.device, args.jobs, overrides, log=say, own=own, yes=args.yes)
    except KeyboardInterrupt:
        base = report_folder(root, where, overrides)
        if base is not None:  # notebooks that finished were published: the report says what is there now
            write_report(root, args.profile, base)
        say("icl: interrupted; the outputs of unfinished notebooks were left as they were"
            + ("; the report was rewritten from the published ones" if base is not None else ""))
        return 130
    base, seconds = report_folder(root, where, overrides), time.perf_counter() - start
    if base is None:
        say(f"total {seconds:.0f} s with --jobs {args.jobs}; no report: -p output_dir put the notebook outside {where}")
    else:
        try:
            readable_timings(base / "timings.json", say, aside=True)
            record_times(base, times, seconds, args.jobs)
            report = write_report(root, args.profile, base)
            say(f"total {seconds:.0f} s with --jobs {args.jobs}; report: {paths.shown(report, root)}")
        except OSError as err:
            if not disk_full(err):
                raise
            say(f"total {seconds:.0f} s with --jobs {args.jobs}; no report: {DISK_FULL}")
    failed = {n: t for n, t in times.items() if t["status"] != "ok"}
    for n, t in failed.items():
        where = f"; full log: {t['log']}" if t.get("log") else ""
        say(f"icl: error: {n}: {t['error']}{where}")
    if not failed:
        return 0
    return 2 if all(t.get("ename") in ("ConfigError", None) for t in failed.values()) else 1

