"""Nothing of the user's is deleted and no special file is replaced (issue 44): icl removes only what it
wrote, writes a device or a pipe as it is, locks each output folder, and every command has the same
guards. Each test failed on the code before the change; each works inside its own tmp_path."""
import errno
import json
import os
import threading

import pytest
from conftest import tiny_config

import icl.running.reproduce as rep
from icl.core.config import ConfigError
from icl.core.train import train_finite
from icl.running import paths, processes, staging
from icl.running.cache import RunCache
from icl.running.cli import main
from icl.running.files import write_atomic, write_json
from icl.running.notebook import _check_type


def one_line(capsys, argv, code=2) -> str:
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# --- special files are written as they are ------------------------------------------------


def test_a_link_to_a_device_stays_a_link_and_the_device_stays_a_device(tmp_path):
    """`--json /dev/null` as root renamed a regular file over /dev/null: here a link to it in tmp_path,
    which the old rename replaced with a regular file."""
    link = tmp_path / "null.json"
    link.symlink_to(os.devnull)
    assert write_json({"a": 1}, link) == link
    assert link.is_symlink() and os.readlink(link) == os.devnull and not os.path.isfile(os.devnull)
    assert [p.name for p in tmp_path.iterdir()] == ["null.json"]  # no temporary file left beside it


def test_a_named_pipe_gets_the_json_through_it(tmp_path):
    pipe = tmp_path / "out.json"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe).read()))
    reader.start()
    while True:  # write once the reader has the pipe open (without a reader it is an error, not a wait)
        try:
            write_atomic(pipe, json.dumps({"a": 1}))
            break
        except OSError as err:
            assert err.errno == errno.ENXIO
    reader.join(10)
    assert json.loads(got[0]) == {"a": 1} and pipe.is_fifo()


def test_a_link_to_a_regular_file_is_followed(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to("real.json")
    write_json({"b": 2}, tmp_path / "link.json")
    assert (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "real.json").read_text()) == {"b": 2}


def test_dev_stdout_is_written_through_its_descriptor_at_its_offset(tmp_path):
    """`--json /dev/stdout` resolved to the file behind it: a shell redirect's log was replaced (the
    lines before lost), and a pipe's /proc entry could not be opened (the JSON went elsewhere)."""
    log = tmp_path / "run.log"
    with open(log, "w") as f:
        f.write("the lines before\n")
        f.flush()
        inode = os.stat(log).st_ino
        write_atomic(f"/dev/fd/{f.fileno()}", '{"a": 1}\n')
    assert log.read_text() == 'the lines before\n{"a": 1}\n' and os.stat(log).st_ino == inode
    read, write = os.pipe()
    try:
        write_atomic(f"/proc/self/fd/{write}", "through the pipe")
        assert os.read(read, 100) == b"through the pipe"
    finally:
        os.close(read), os.close(write)


def test_a_table_goes_beside_a_file_never_beside_a_device_or_a_stream(tmp_path):
    """`make bench`'s `--json /dev/null` wrote its Markdown table as a new file /dev/null.md."""
    from icl.running.files import regular_target

    assert regular_target(tmp_path / "bench.json") and regular_target(tmp_path / "not-yet.json")
    assert not regular_target("/dev/null") and not regular_target("/dev/stdout") and not regular_target("/dev/fd/1")


def test_json_into_a_missing_folder_is_refused_in_one_line(tmp_path, capsys):
    err = one_line(capsys, ["judge", str(tmp_path / "c.csv"), "--dim", "8", "--key-dim", "2", "--json",
                            str(tmp_path / "missing" / "v.json")])
    assert "does not exist" in err and not (tmp_path / "missing").exists()


# --- icl deletes only what it wrote ------------------------------------------------------------


def staged_run(tmp_path, name="02_easy_nonlinear", outputs=("results.json", "loss.png")):
    """A run of `name` staged beside its output folder, as reproduce leaves it before publishing."""
    root = tmp_path / "repo"
    params = {"output_dir": f"outputs/{name}"}
    where = staging.staging_paths(root, params, name)
    paths.make_own(where["stage"], name, "quick")
    for f in outputs:
        (where["stage"] / f).write_text("new " + f)
    return root, where


def test_a_users_files_in_a_notebook_folder_survive_a_rerun(tmp_path):
    root, where = staged_run(tmp_path)
    final = paths.make_own(where["final"], "02_easy_nonlinear", "quick")
    for f in ("results.json", "loss.png"):
        (final / f).write_text("old " + f)
    paths.record_written(final)  # a previous run wrote those two
    (final / "my_notes.md").write_text("mine")
    (final / "copied").mkdir()
    (final / "copied" / "sweep.json").write_text("mine too")
    staging.publish(root, where)
    assert (final / "my_notes.md").read_text() == "mine" and (final / "copied" / "sweep.json").read_text() == "mine too"
    assert (final / "results.json").read_text() == "new results.json"
    assert paths.foreign(final, final) == ["copied", "my_notes.md"]  # still not icl's: the next run keeps them too


def test_a_folder_from_before_markers_listed_files_keeps_what_the_new_run_does_not_write(tmp_path):
    root, where = staged_run(tmp_path)
    final = paths.make_own(where["final"], "02_easy_nonlinear", "quick")  # a marker with no list
    (final / "results.json").write_text("old")
    (final / "notes.txt").write_text("mine")
    staging.publish(root, where)
    assert (final / "notes.txt").read_text() == "mine" and (final / "results.json").read_text() == "new results.json"


def test_a_users_file_in_the_way_of_a_new_output_stops_the_publish_and_keeps_both(tmp_path):
    root, where = staged_run(tmp_path)
    final = paths.make_own(where["final"], "02_easy_nonlinear", "quick")
    (final / "results.json").write_text("old")
    paths.record_written(final)
    (final / "loss.png").write_text("the user's own figure")  # not listed: the user's
    with pytest.raises(ConfigError, match="loss.png was not written by icl"):
        staging.publish(root, where)
    assert (final / "loss.png").read_text() == "the user's own figure" and where["stage"].is_dir()


def test_an_output_dir_inside_another_notebooks_folder_is_refused(tmp_path):
    """`-p output_dir outputs/ci/02_easy_nonlinear/variant` was deleted by 02's next plain run."""
    root = tmp_path / "repo"
    paths.make_own(root / "outputs" / "ci" / "02_easy_nonlinear", "02_easy_nonlinear", "ci")
    with pytest.raises(ConfigError, match="lies inside icl's folder for notebook 02_easy_nonlinear"):
        paths.check_output_dir(root, "outputs/ci/02_easy_nonlinear/variant", notebook="03_difficult", profile="ci")


def test_report_outputs_refuses_a_users_folder_and_never_deletes_its_files(clone, capsys, tmp_path, monkeypatch):
    """`icl report --outputs DIR` removed a user's timings.json and overwrote their REPORT.md."""
    theirs = tmp_path / "precious"
    (theirs / "timings.json").write_text("my own timings, not JSON")
    (theirs / "REPORT.md").write_text("my report")
    monkeypatch.setenv(paths.OUTPUT_ROOT_ENV, str(tmp_path))
    err = one_line(capsys, ["report", "--outputs", str(theirs)])
    assert "icl did not write" in err
    assert (theirs / "timings.json").read_text() == "my own timings, not JSON"
    assert (theirs / "REPORT.md").read_text() == "my report" and (theirs / "thesis.tex").read_text() == "mine"


def test_an_unreadable_timings_file_is_left_by_report(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text("<<<<<<< HEAD")
    said = []
    assert staging.readable_timings(path, said.append) is False
    assert path.read_text() == "<<<<<<< HEAD" and "left as it is" in said[0]


def test_report_reads_timings_through_the_non_blocking_reader(tmp_path):
    """A named pipe as timings.json hung `icl report` (after saying it was left alone), and a link to
    /dev/zero read until memory ran out."""
    from icl.running.staging import read_timings

    os.mkfifo(tmp_path / "timings.json")
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "timings.json").symlink_to("/dev/zero")
    done = []
    reader = threading.Thread(target=lambda: done.append((read_timings(tmp_path / "timings.json")[0],
                                                          read_timings(tmp_path / "zero" / "timings.json")[0])), daemon=True)
    reader.start()
    reader.join(10)
    assert done == [({}, {})]


def test_a_link_or_a_pipe_in_an_entrys_place_is_replaced_by_the_entry(tmp_path):
    """A cache entry that was a link to /dev/null: the recomputed run was written through it into
    /dev/null, never stored, and recomputed on every rerun."""
    cache = RunCache(tmp_path / "cache")
    cfg = tiny_config()
    path = cache.path(cfg)
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/null")
    cache.store(cfg, {"final_loss": 0.5})
    assert not path.is_symlink() and json.loads(path.read_text())["result"] == {"final_loss": 0.5}
    path.unlink()
    os.mkfifo(path)
    cache.store(cfg, {"final_loss": 0.5})
    assert path.is_file()


def test_a_link_where_the_report_goes_is_refused_and_its_target_kept(clone, capsys, tmp_path):
    """outputs/ci/claims.json, a link to a user's file outside outputs/: `icl report` overwrote that file."""
    root = clone / "outputs" / "ci"
    paths.make_own(root, paths.RUN_ROOT, "ci")
    (root / "claims.json").symlink_to(tmp_path / "precious" / "thesis.tex")
    err = one_line(capsys, ["report", "--profile", "ci"])
    assert "this is a link" in err, err
    assert (tmp_path / "precious" / "thesis.tex").read_text() == "mine"


def test_a_cache_that_is_a_file_is_refused_before_any_entry_is_read(tmp_path):
    """`--cache FILE` printed an entry "corrupt ... recomputing" line per run before the refusal."""
    from icl.running.cli import check_cache_path

    (tmp_path / "cachefile").write_text("mine")
    with pytest.raises(ConfigError, match="is a file"):
        check_cache_path(str(tmp_path / "cachefile"))


def test_a_kernels_warnings_reach_the_terminal_once(tmp_path):
    """Runs a full cache could not take were said only inside the executed notebook."""
    log = tmp_path / "k.log"
    line = "icl: warning: 2 finished run(s) could not be written to the cache (No space left on device); ..."
    log.write_text(f"some library's chatter\n{line}\n{line}\n")
    assert rep.kernel_warnings(log) == [line] and rep.kernel_warnings(tmp_path / "none.log") == []


def test_an_interrupted_reproduce_rewrites_the_report_from_what_it_published(clone, capsys, monkeypatch):
    """A SIGINT to reproduce's main process published the notebooks that finished and left REPORT.md,
    claims.json and the README describing the run before."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    written = []
    monkeypatch.setattr(rep, "run_all", interrupted)
    monkeypatch.setattr(rep, "write_report", lambda root, profile, base: written.append(base))
    assert main(["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1"]) == 130
    assert written == [clone / "outputs" / "ci"] and "report was rewritten" in capsys.readouterr().err


# --- one lock per output folder -------------------------------------------------------------


def test_two_runs_into_one_output_folder_do_not_both_proceed(clone, capsys, monkeypatch):
    """Two profiles into one -p output_dir: each took its own profile's lock, and the first run's
    results were gone after it said "done"."""
    monkeypatch.setattr(rep, "run_notebook", lambda *a: pytest.fail("a notebook ran under a lock held elsewhere"))
    monkeypatch.setattr(rep.plan, "check_work", lambda *a: {})
    held = processes.hold_lock(clone / "outputs" / "shared" / ".staging", "another run")
    try:
        err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                                "-p", "output_dir", "outputs/shared/02_easy_nonlinear"])
        assert "is running" in err and "outputs/shared" in err
    finally:
        held.close()


# --- a full disk is one line, and what was published stays ------------------------------------


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as a write() raises it: no file name


def test_a_full_disk_anywhere_in_a_command_is_one_line(clone, capsys, monkeypatch):
    """A full disk while writing a report (or any file without a name in the error) was a traceback."""
    import icl.running.report as report

    paths.make_own(clone / "outputs" / "ci", paths.RUN_ROOT, "ci")  # a run root, as reproduce leaves it
    monkeypatch.setattr(report, "write_own", no_space)
    err = one_line(capsys, ["report", "--profile", "ci"])
    assert "no space left on the disk" in err and "stays whole" in err


def test_a_full_disk_during_a_notebook_is_said_by_reproduce_and_keeps_the_published_folder(clone, capsys, monkeypatch):
    """A notebook whose kernel hit a full disk (saving itself or storing a run in the cache) gave 104
    lines and no report; the report then failed on the same disk."""
    monkeypatch.setattr(rep.plan, "check_work", lambda *a: {})
    monkeypatch.setattr(rep, "execute", no_space)
    monkeypatch.setattr(rep, "write_report", no_space)
    published = clone / "outputs" / "ci" / "02_easy_nonlinear"
    paths.make_own(published, "02_easy_nonlinear", "ci")
    (published / "loss_vs_depth.png").write_bytes(b"the last complete run's figure")
    assert main(["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 4 and err.count("stays whole") == 1, err
    assert err.splitlines()[-1].startswith("icl: error: 02_easy_nonlinear: no space left on the disk"), err
    assert (published / "loss_vs_depth.png").read_bytes() == b"the last complete run's figure"


# --- every command has the guards -------------------------------------------------------------


def test_a_named_pipe_as_the_process_registry_is_refused_not_waited_on(tmp_path):
    folder = tmp_path / ".staging"
    folder.mkdir()
    os.mkfifo(folder / ".processes")
    with pytest.raises(ConfigError, match="cannot be read as icl's process registry"):
        processes.hold_lock(folder, "icl reproduce")


def test_bound_refuses_a_million_evaluation_sets_in_one_line(capsys):
    """`icl bound --eval-sets 1000000` ran for about 52 hours without a word."""
    err = one_line(capsys, ["bound", "--dim", "6", "--context-length", "12", "--eval-contexts", "64", "--depths", "1", "2",
                            "--fit-contexts", "64", "--eval-sets", "100000000"])
    assert "more than a day" in err and "--yes" in err


def test_a_notebooks_threads_are_bounded():
    from icl.core.config import check_threads

    with pytest.raises(ConfigError, match="threads: 100000 is not allowed"):
        check_threads(100000)
    assert check_threads(1) == 1


def test_a_memory_check_comes_before_any_timed_step(capsys):
    """`-p batch_size 1e8` through reproduce gave a 48-line allocator traceback from the timing step."""
    from icl.running.workload import estimate

    with pytest.raises(ConfigError, match="needs about"):
        estimate([[tiny_config(model="softmax", batch_size=100_000_000)]])


def test_a_run_that_blows_up_is_diverged_and_never_an_ordinary_result():
    """A learning rate of 1e6 took the loss to 1.7e9 and was cached as an ordinary run."""
    cfgs = [tiny_config(model="softmax", depth=1, learning_rate=1e6), tiny_config(model="softmax", depth=2)]
    results = train_finite(cfgs, progress=False)
    blown, fine = results
    if not blown.get("diverged"):  # the optimiser may break the loss to NaN first: diverged either way
        pytest.fail(f"ended at {blown['final_loss']} from {blown['initial_loss']}, recorded as a result")
    assert "diverged" in blown["error"] and "final_loss" in fine and not fine.get("diverged")


def test_any_damaged_cache_entry_is_recomputed_even_one_nested_too_deep(tmp_path, capsys):
    cache = RunCache(tmp_path / "runs")
    cfg = tiny_config(model="softmax")
    path = cache.path(cfg)
    path.parent.mkdir(parents=True)
    path.write_text("[" * 100_000 + "]" * 100_000)  # json.loads raises RecursionError
    assert cache.load(cfg) is None
    assert "recomputing it" in capsys.readouterr().err


def test_1e_minus_3_is_a_number():
    assert _check_type("learning_rate", "1e-3", 0.003) == 0.001
    with pytest.raises(ConfigError, match="must be a number"):
        _check_type("learning_rate", "fast", 0.003)


def test_a_warning_a_cell_wrote_reaches_the_terminal(tmp_path):
    """ipykernel puts a cell's standard error into the notebook, not the kernel's log: a full cache
    inside a notebook was said only there."""
    import nbformat

    line = "icl: warning: 3 finished run(s) could not be written to the cache (No space left on device); ..."
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="icl: warning: on stdout, not a warning\n"),
        nbformat.v4.new_output("stream", name="stderr", text=f"progress\n{line}\n")])])
    nbformat.write(nb, tmp_path / "n.ipynb")
    assert rep.kernel_warnings(tmp_path / "none.log", tmp_path / "n.ipynb") == [line]
    (tmp_path / "broken.ipynb").write_text('{"cells": [')  # a half-written notebook: nothing, no error
    assert rep.kernel_warnings(tmp_path / "none.log", tmp_path / "broken.ipynb") == []
