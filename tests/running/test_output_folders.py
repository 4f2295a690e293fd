"""Nothing finished is lost to where a run writes: a folder is replaced only when its marker names
the same notebook and profile, a run root (--outputs DIR) never; a report is rewritten only where
the run's notebooks are; the staging folder is a real folder; an unreadable timings.json costs a
run nothing but its old times. Each test works in a copy of the repository (`clone`)."""
import json
from pathlib import Path

import pytest
from conftest import ROOT

import icl.running.reproduce as rep
from icl.running import paths, staging
from icl.running.cli import main


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(capsys, argv, code=2) -> str:
    got = main(argv)
    err = capsys.readouterr().err.strip()
    assert got == code, err
    assert "Traceback" not in err, err
    return err


def finished_run(clone: Path) -> Path:
    """What `reproduce --profile ci --only 02_easy_nonlinear 01_easy_linear --outputs outputs/v` leaves."""
    staging.destinations(clone, "ci", ["01_easy_linear", "02_easy_nonlinear"], outputs="outputs/v")
    run = clone / "outputs" / "v"
    for name in ("01_easy_linear", "02_easy_nonlinear"):
        (paths.make_own(run / name, name, "ci") / "results.json").write_text('{"claims": []}')
    for name in ("REPORT.md", "claims.json", "timings.json"):
        (run / name).write_text("{}")
    return run


@pytest.fixture
def no_notebook_runs(monkeypatch):
    """run_notebook as if its notebook completed (and published nothing): what comes after it runs."""
    ran = []
    monkeypatch.setattr(rep, "run_notebook", lambda root, name, params, env: ran.append(params) or
                        {"status": "ok", "seconds": 1.0, "runs_trained": None})
    return ran


def test_a_mistyped_output_dir_naming_a_run_root_is_refused_and_deletes_nothing(clone, capsys, no_notebook_runs):
    """The issue's case: `-p output_dir outputs/v` (the notebook's subfolder left off) replaced all
    of outputs/v, exit 0, and rewrote outputs/ci/REPORT.md."""
    run = finished_run(clone)
    before = files(run)
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                            "-p", "output_dir", "outputs/v"])
    assert len(err.splitlines()) == 1 and "run root" in err and "REPORT.md" in err, err
    assert "outputs/v/02_easy_nonlinear" in err, err  # what was probably meant
    assert files(run) == before and not no_notebook_runs
    assert not (clone / "outputs" / "ci" / "REPORT.md").exists()


@pytest.mark.parametrize("folder,made_for", [("outputs/v/01_easy_linear", ("01_easy_linear", "ci")),
                                             ("outputs/q/02_easy_nonlinear", ("02_easy_nonlinear", "quick"))])
def test_only_a_folder_made_for_the_same_notebook_and_profile_is_replaced(clone, capsys, no_notebook_runs,
                                                                          folder, made_for):
    finished_run(clone)
    paths.make_own(clone / "outputs" / "q" / "02_easy_nonlinear", "02_easy_nonlinear", "quick")
    (clone / "outputs" / "q" / "02_easy_nonlinear" / "results.json").write_text("{}")
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                            "-p", "output_dir", folder])
    assert len(err.splitlines()) == 1 and f"notebook {made_for[0]} at the {made_for[1]} profile" in err, err
    assert not no_notebook_runs


def test_publish_never_replaces_a_run_root(clone):
    """Checked before the run and again at the swap: a run root stays whole."""
    run = finished_run(clone)
    before = files(run)
    where = staging.staging_paths(clone, {"output_dir": "outputs/v"}, "02_easy_nonlinear")
    (paths.make_own(where["stage"], "02_easy_nonlinear", "ci") / "results.json").write_text("{}")
    with pytest.raises(paths.ConfigError, match="run root"):
        staging.publish(clone, where)
    assert files(run) == before


def test_a_folder_marked_before_markers_named_notebooks_is_replaced_only_by_its_namesake(clone):
    legacy = clone / "outputs" / "old"
    for name in ("02_easy_nonlinear", "v"):
        (legacy / name).mkdir(parents=True)
        (legacy / name / paths.MARKER).write_text(paths.MARKER_TEXT)
        (legacy / name / "results.json").write_text("{}")
    paths.check_output_dir(clone, "outputs/old/02_easy_nonlinear", notebook="02_easy_nonlinear", profile="ci")
    with pytest.raises(paths.ConfigError, match="nothing was changed"):
        paths.check_output_dir(clone, "outputs/old/v", notebook="02_easy_nonlinear", profile="ci")
    paths.check_output_dir(clone, "outputs/old/v", notebook="02_easy_nonlinear")  # a run by hand writes in place


def test_outputs_may_not_name_a_notebooks_folder(clone, capsys, no_notebook_runs):
    finished_run(clone)
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                            "--outputs", "outputs/v/01_easy_linear"])
    assert "--outputs" in err and "notebook 01_easy_linear" in err, err
    assert not no_notebook_runs


def test_a_notebook_moved_out_of_the_run_root_rewrites_no_report(clone, capsys, no_notebook_runs):
    """`-p output_dir outputs/v/02_easy_nonlinear` (right this time) at the ci profile: the report of
    outputs/ci would describe folders this run did not write, and outputs/v's was not asked for."""
    run = finished_run(clone)
    before = files(run)
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                            "-p", "output_dir", "outputs/v/02_easy_nonlinear"], code=0)
    assert no_notebook_runs and "no report" in err, err
    locks = {".staging/.lock": b"", ".staging/.processes": b""}  # the run took the output folder's lock there
    assert files(run) == {**before, **locks} and not (clone / "outputs" / "ci" / "REPORT.md").exists()


def test_a_linked_staging_folder_is_refused(clone, capsys, no_notebook_runs):
    """The lock, the logs and the kernels' connection files went to the link's target."""
    elsewhere = clone.parent / "elsewhere"
    elsewhere.mkdir()
    (clone / "outputs" / "ci").mkdir()
    (clone / "outputs" / "ci" / ".staging").symlink_to(elsewhere)
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1"])
    assert len(err.splitlines()) == 1 and "symbolic link" in err, err
    assert not list(elsewhere.iterdir()) and not no_notebook_runs


@pytest.mark.parametrize("text", ['{\n<<<<<<< HEAD\n "02_easy_nonlinear": {"seconds": 9.0}\n=======\n}\n>>>>>>> b\n',
                                  '{"02_easy_nonlinear": {"seconds": 9.0, "runs_', '["a list"]', "\xff\xfe"])
def test_an_unreadable_timings_file_is_kept_aside_and_the_report_written(clone, capsys, no_notebook_runs, text):
    """A merge conflict in timings.json made record_times raise after every notebook had run: no
    REPORT.md, no claims.json. Then it was deleted; now it is kept, renamed."""
    base = clone / "outputs" / "ci"
    base.mkdir()
    (base / "timings.json").write_bytes(text.encode("latin-1"))
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1"], code=0)
    assert len([line for line in err.splitlines() if "timings.json" in line]) == 1, err
    assert "kept as timings.json.unreadable" in err, err
    assert (base / "timings.json.unreadable").read_bytes() == text.encode("latin-1")
    times = json.loads((base / "timings.json").read_text())
    assert times["02_easy_nonlinear"]["status"] == "ok" and times["total"]["notebooks"] == ["02_easy_nonlinear"]
    assert (base / "REPORT.md").is_file() and (base / "claims.json").is_file()


def test_the_profile_decides_where_reproduce_writes_and_a_notebook_by_hand_writes_to_scratch():
    """A profile file sets the experiment, not the folder: `papermill -f params/quick/X.yaml` wrote
    the committed outputs/X/ in place."""
    import yaml

    for name in rep.NOTEBOOKS:
        assert rep.declared_parameters(ROOT, name)["output_dir"] == f"outputs/scratch/{name}"
        for profile in rep.PROFILES:
            file = ROOT / "params" / profile / f"{name}.yaml"  # a notebook needs none where it differs in nothing
            assert not file.exists() or "output_dir" not in (yaml.safe_load(file.read_text()) or {})
            assert rep.notebook_parameters(ROOT, profile, name, None)["output_dir"] == \
                f"{staging.profile_root(profile)}/{name}"


@pytest.mark.slow
def test_the_issues_case_end_to_end(clone, capsys, monkeypatch):
    """A real ci run --outputs outputs/v, then the same with `-p output_dir outputs/v`: all of
    outputs/v (23 files) was replaced by one notebook's, exit 0."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert main(["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                 "--outputs", "outputs/v"]) == 0
    capsys.readouterr()
    run = clone / "outputs" / "v"
    before = files(run)
    assert "REPORT.md" in before and "02_easy_nonlinear/02_easy_nonlinear.ipynb" in before
    err = one_line(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "--jobs", "1",
                            "-p", "output_dir", "outputs/v"])
    assert len(err.splitlines()) == 1 and "run root" in err, err
    assert files(run) == before and not (clone / "outputs" / "ci" / "REPORT.md").exists()


def test_a_garbled_process_registry_is_rebuilt_when_the_lock_is_taken(tmp_path):
    """Bytes that are not text in `.staging/.processes` raised UnicodeDecodeError at every later run."""
    staging_dir = tmp_path / "outputs" / "ci" / ".staging"
    staging_dir.mkdir(parents=True)
    (staging_dir / ".processes").write_bytes(b"\xff\xfe<<<<<<< HEAD\n12 34 worker\n")
    rep.hold_lock(tmp_path, "ci").close()
    assert (staging_dir / ".processes").read_text() == ""
