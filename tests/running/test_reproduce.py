"""`icl reproduce`: parameters and device are checked before any notebook starts (one line, exit
2), notebooks run in parallel processes in dependency order, a notebook's outputs are replaced
only when its run completes, and a failed run says so in one line, in a log and in REPORT.md."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT

import icl.running.paths as paths_module
import icl.running.reproduce as rep
from icl.running.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")


def one_error_line(capsys, argv, *words) -> str:
    start = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    assert seconds < 15, f"{seconds:.1f} s before the error"  # < 5 s on an idle machine
    return err


@pytest.mark.parametrize("key,value,words", [
    ("key_dims", "[4, -1]", ["03_difficult", "key_dims", "-1"]),
    ("top_k", "1.5", ["03_difficult", "top_k", "1.5"]),
    ("depths", "[0, 2]", ["03_difficult", "depths", "every depth must be >= 1"]),
    ("input_exponet", "1.3", ["input_exponet"]),
    ("input_exponent", "abc", ["03_difficult", "input_exponent", "'abc'", "not a number"]),  # was a ValueError traceback
    ("task_exponent", "-1000", ["03_difficult", "task_exponent", "-1000", "[-10, 10]"]),
    ("spectra", "[[0, 50]]", ["03_difficult", "spectra", "50", "[-10, 10]"]),
    ("seeds", "[99999999999999999999]", ["03_difficult", "seeds", "99999999999999999999"]),
])
def test_bad_parameter_stops_before_any_notebook_starts(capsys, monkeypatch, key, value, words):
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    one_error_line(capsys, ["reproduce", "--profile", "ci", "--only", "03_difficult", "-p", key, value], *words)


def test_cuda_without_a_gpu_stops_before_any_notebook_starts(capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    one_error_line(capsys, ["reproduce", "--profile", "paper", "--device", "cuda"], "device", "cuda")


@pytest.mark.parametrize("argv,word", [(["--profile", "fast"], "profile"), (["--device", "tpu"], "device"),
                                       (["--jobs", "0"], "jobs"), (["--only", "07_nothing"], "07_nothing")])
def test_bad_reproduce_flags_exit_2(capsys, argv, word):
    one_error_line(capsys, ["reproduce", *argv], word)


@pytest.mark.slow
def test_make_reproduce_without_a_gpu_fails_fast_in_a_real_process():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc, seconds, cpu = timed(["make", "-s", "reproduce", "PROFILE=paper", "DEVICE=cuda"])
    assert proc.returncode == 2 and proc.stdout == ""
    icl_lines = [line for line in proc.stderr.splitlines() if not line.startswith("make")]
    assert len(icl_lines) == 1 and "device" in icl_lines[0] and "cuda" in icl_lines[0], proc.stderr
    assert cpu < 5 and seconds < 60, f"{seconds:.1f} s, {cpu:.1f} s of CPU"  # ~3 s on an idle machine
    print(f"{seconds:.1f} s ({cpu:.1f} s CPU): {proc.stderr.strip()}")


def timed(cmd):
    """Run cmd; (process, wall seconds, CPU seconds of it and its children): on a loaded machine
    the CPU time is what says whether it would take seconds on an idle one."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.mark.slow
def test_bad_parameter_in_a_real_process_is_one_line_in_seconds():
    proc, seconds, cpu = timed([sys.executable, "-m", "icl", "reproduce", "--profile", "ci", "--only", "04_generalized",
                                "-p", "key_dims", "[3, -1]"])
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "key_dims" in lines[0] and "-1" in lines[0], proc.stderr
    assert cpu < 5 and seconds < 60, f"{seconds:.1f} s, {cpu:.1f} s of CPU"
    print(f"{seconds:.1f} s ({cpu:.1f} s CPU): {proc.stderr.strip()}")


# --- scheduling ---------------------------------------------------------------------------

def fake_runner(root, name, params, env):
    """Stands in for run_notebook in a worker process: records when it ran and which threads."""
    log = Path(os.environ["FAKE_LOG"])
    start = time.time()
    time.sleep(0.6)
    status = "failed" if name in os.environ.get("FAKE_FAIL", "").split(",") else "ok"
    with open(log, "a") as f:
        f.write(json.dumps({"name": name, "start": start, "end": time.time(), "pid": os.getpid(),
                            "omp": env.get("OMP_NUM_THREADS"), "threads": params.get("threads")}) + "\n")
    return {"status": status, "seconds": 0.6, "runs_trained": None, **({"error": "boom"} if status != "ok" else {})}


def scheduled(tmp_path, monkeypatch, jobs, fail=""):
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("FAKE_FAIL", fail)
    monkeypatch.setattr(rep, "run_notebook", fake_runner)
    lines = []
    results = rep.run_all(ROOT, "ci", list(rep.NOTEBOOKS), "cpu", jobs, log=lines.append)
    runs = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    return results, {r["name"]: r for r in runs}, lines


@pytest.mark.slow
def test_jobs_run_notebooks_at_once_and_05_after_what_it_reads(tmp_path, monkeypatch):
    results, runs, lines = scheduled(tmp_path, monkeypatch, jobs=2)
    assert all(r["status"] == "ok" for r in results.values()) and set(runs) == set(rep.NOTEBOOKS)
    for need in rep.NEEDS["05_fitting_appendix"]:
        assert runs["05_fitting_appendix"]["start"] >= runs[need]["end"], need
    overlaps = [(a, b) for a in runs for b in runs if a < b and runs[a]["start"] < runs[b]["end"] and runs[b]["start"] < runs[a]["end"]]
    assert overlaps, "no two notebooks ran at the same time"
    assert len({r["pid"] for r in runs.values()}) >= 2  # separate processes
    assert all(r["omp"] == "1" and r["threads"] == 1 for r in runs.values())  # one thread each
    for name in rep.NOTEBOOKS:  # a start and an end line per notebook
        assert sum(name in line and "started" in line for line in lines) == 1
        assert sum(name in line and "done in" in line for line in lines) == 1


@pytest.mark.slow
def test_one_job_runs_in_order_with_the_profiles_threads(tmp_path, monkeypatch):
    results, runs, _ = scheduled(tmp_path, monkeypatch, jobs=1)
    order = sorted(runs, key=lambda n: runs[n]["start"])
    assert order == list(rep.NOTEBOOKS)
    assert all(r["omp"] is None for r in runs.values())


@pytest.mark.slow
def test_a_failed_dependency_stops_the_notebooks_that_read_it(tmp_path, monkeypatch):
    results, runs, lines = scheduled(tmp_path, monkeypatch, jobs=2, fail="03_difficult")
    assert results["03_difficult"]["status"] == "failed"
    assert "05_fitting_appendix" not in runs and results["05_fitting_appendix"]["status"] == "failed"
    assert "03_difficult" in results["05_fitting_appendix"]["error"]
    assert results["02_easy_nonlinear"]["status"] == "ok"


def test_dependencies_are_data():
    assert set(rep.NEEDS) <= set(rep.NOTEBOOKS)
    assert all(set(v) <= set(rep.NOTEBOOKS) for v in rep.NEEDS.values())


def test_circular_needs_stop_instead_of_waiting_forever(tmp_path, monkeypatch):
    monkeypatch.setattr(rep, "NEEDS", {"01_easy_linear": ("02_easy_nonlinear",), "02_easy_nonlinear": ("01_easy_linear",)})
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    with pytest.raises(rep.ConfigError, match="cycle"):
        rep.run_all(ROOT, "ci", ["01_easy_linear", "02_easy_nonlinear"], "cpu", 1, log=lambda line: None)


# --- staging ------------------------------------------------------------------------------

def test_publish_replaces_the_whole_folder_and_points_files_at_it(tmp_path):
    final = tmp_path / "outputs" / "01_a"
    paths_module.make_own(final)
    (final / "stale.png").write_bytes(b"old")
    (final / "results.json").write_text("{}")
    paths_module.record_written(final)  # the previous run wrote both: icl's to replace
    paths = rep.staging_paths(tmp_path, {"output_dir": "outputs/01_a"}, "01_a")
    paths_module.make_own(paths["stage"])
    (paths["stage"] / "results.json").write_text(json.dumps({"figure": "outputs/.staging/01_a/new.png"}))
    (paths["stage"] / "new.png").write_bytes(b"new")
    rep.publish(tmp_path, paths)
    assert sorted(p.name for p in final.iterdir()) == [paths_module.MARKER, "new.png", "results.json"]
    assert json.loads((final / "results.json").read_text()) == {"figure": "outputs/01_a/new.png"}
    assert not paths["stage"].exists() and not paths["old"].exists()


@pytest.mark.slow
def test_a_failing_notebook_leaves_the_previous_outputs_and_names_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv(paths_module.OUTPUT_ROOT_ENV, str(tmp_path))  # inherited by the notebook's kernel
    out = paths_module.make_own(tmp_path / "outputs" / "02_easy_nonlinear")
    (out / "previous.txt").write_text("the last complete run")
    params = rep.notebook_parameters(ROOT, "ci", "02_easy_nonlinear", "cpu")
    params.update(output_dir=str(out), depths=[0, 2])  # fails in the notebook's parameter checks
    r = rep.run_notebook(str(ROOT), "02_easy_nonlinear", params, {"MPLBACKEND": "Agg"})
    assert r["status"] == "failed" and r["ename"] == "ConfigError"
    assert r["error"].startswith("ConfigError: depths: [0, 2] is not allowed") and "\n" not in r["error"]
    assert sorted(p.name for p in out.iterdir()) == [paths_module.MARKER, "previous.txt"]
    log = ROOT / r["log"]
    assert log.exists() and "ConfigError: depths" in log.read_text()
    assert (ROOT / r["notebook"]).exists()  # the partial notebook, for a look


def test_report_marks_a_notebook_whose_last_run_failed(tmp_path):
    base = tmp_path / "outputs" / "ci"
    base.mkdir(parents=True)
    (base / "timings.json").write_text(json.dumps({
        "01_a": {"seconds": 30.0, "runs_trained": 4, "status": "ok"},
        "03_c": {"seconds": 5.0, "runs_trained": None, "status": "failed", "error": "ConfigError: x",
                 "log": "outputs/ci/.staging/03_c.log"}}))
    text = rep.write_report(tmp_path, "ci").read_text()
    assert "The last run of `03_c` failed** (ConfigError: x; log: `outputs/ci/.staging/03_c.log`)" in text
    assert "03_c FAILED after 5 s" in text and "01_a 30 s (4 runs trained)" in text


def test_golden_and_reproduce_are_commands_of_their_modules():
    import icl.running.golden
    from icl.running.cli import COMMANDS, handler

    assert COMMANDS["golden"][0] == "icl.running.golden" and COMMANDS["reproduce"][0] == "icl.running.reproduce"
    assert handler("golden", "icl.running.golden") == (icl.running.golden.add_arguments, icl.running.golden.run)
    assert handler("reproduce", "icl.running.reproduce") == (rep.add_arguments, rep.run)

def test_a_second_reproduction_of_the_same_profile_is_refused(tmp_path, monkeypatch):
    (tmp_path / "outputs").mkdir()
    held = rep.hold_lock(tmp_path, "ci")
    try:
        with pytest.raises(rep.ConfigError, match="another icl run into this folder is running"):
            rep.hold_lock(tmp_path, "ci")
        rep.hold_lock(tmp_path, "quick").close()  # another profile is another folder
    finally:
        held.close()
    rep.hold_lock(tmp_path, "ci").close()  # released


@pytest.mark.slow
def test_a_completed_notebook_is_published_into_its_output_folder(clone):
    """A real ci run in a copy of the repository: the staged folder replaces the output folder."""
    params = rep.notebook_parameters(clone, "ci", "02_easy_nonlinear", "cpu")
    r = rep.run_notebook(str(clone), "02_easy_nonlinear", params, {"MPLBACKEND": "Agg"})
    assert r["status"] == "ok", r
    final = clone / params["output_dir"]
    assert (final / "02_easy_nonlinear.ipynb").is_file() and (final / paths_module.MARKER).is_file()
    assert not rep.staging_paths(clone, params, "02_easy_nonlinear")["stage"].exists()


@pytest.mark.slow
def test_make_reproduce_runs_one_notebook_per_core_under_omp_num_threads_1():
    """`JOBS ?= $(shell nproc)` gave 1 under OMP_NUM_THREADS=1 (nproc obeys it): one notebook at a time."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["make", "-n", "-s", "reproduce"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    line = [line for line in proc.stdout.splitlines() if "icl reproduce" in line][-1]
    default = subprocess.run([sys.executable, "-c", "from icl.running.reproduce import cores; print(cores())"], env=env,
                             capture_output=True, text=True, timeout=60).stdout.strip()
    jobs = re.search(r"--jobs (\d+)", line)
    assert (jobs.group(1) if jobs else default) == default == str(len(os.sched_getaffinity(0))), (line, default)


@pytest.mark.parametrize("argv,word", [(["--outputs", "/etc/icl-run"], "--outputs"),
                                       (["--outputs", "outputs/x", "--smoke"], "--smoke")])
def test_outputs_outside_the_output_roots_or_with_smoke_exit_2(capsys, monkeypatch, argv, word):
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook started"))
    one_error_line(capsys, ["reproduce", "--profile", "ci", *argv], word)
    assert not Path("/etc/icl-run").exists()


@pytest.mark.slow
def test_outputs_moves_every_folder_and_the_report_but_leaves_the_profiles_alone(clone, monkeypatch):
    """A run --outputs DIR (a CPU variant's, say) writes its notebooks, REPORT.md and timings.json
    under DIR, and nothing under the profile's own folder."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert main(["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--outputs", "outputs/variant"]) == 0
    run = clone / "outputs" / "variant"
    assert (run / "02_easy_nonlinear" / "02_easy_nonlinear.ipynb").is_file() and (run / paths_module.MARKER).is_file()
    times = json.loads((run / "timings.json").read_text())
    assert times["total"]["notebooks"] == ["02_easy_nonlinear"] and (run / "REPORT.md").is_file()
    assert not (clone / "outputs" / "ci" / "02_easy_nonlinear").exists()
    assert (clone / "outputs" / "notes.txt").read_text() == "mine"
