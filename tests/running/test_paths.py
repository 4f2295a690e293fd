"""No value a user types makes icl delete or overwrite their files: an output folder must lie inside
the repository's outputs/ (or a root named in ICL_OUTPUT_ROOT) and be one icl made. Every test works
on a copy of the repository in its own temporary folder and points at nothing outside it."""
from pathlib import Path

import pytest

from icl.running import notebook as nb
from icl.running import paths
from icl.running.cli import main


def files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, argv, *words):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.mark.parametrize("target", ["outputs", ".", "..", "../precious", "icl", "outputs/.."])
def test_reproduce_refuses_an_output_folder_it_did_not_make_and_touches_nothing(clone, capsys, target):
    before = {"repo": files(clone), "outside": files(clone.parent / "precious")}
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "05_fitting_appendix", "-p", "output_dir", target],
            "05_fitting_appendix", "output_dir", repr(target))
    assert files(clone) == before["repo"] and files(clone.parent / "precious") == before["outside"]
    assert not (clone / "outputs" / ".staging").exists()


def test_an_explicit_output_root_still_needs_a_folder_icl_made(clone, capsys, monkeypatch):
    outside = clone.parent / "precious"
    monkeypatch.setenv(paths.OUTPUT_ROOT_ENV, str(clone.parent))
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "05_fitting_appendix", "-p", "output_dir", str(outside)],
            "did not write")
    assert files(outside) == {"thesis.tex": "mine"}


def test_two_notebooks_may_not_share_an_output_folder(clone, capsys):
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "02_easy_nonlinear", "03_difficult",
                     "-p", "output_dir", "outputs/mine"], "same folder")


def test_a_link_out_of_outputs_is_outside(clone, capsys):
    (clone / "outputs" / "link").symlink_to(clone.parent / "precious")
    refused(capsys, ["reproduce", "--profile", "ci", "--only", "05_fitting_appendix", "-p", "output_dir", "outputs/link"],
            "not allowed")
    assert files(clone.parent / "precious") == {"thesis.tex": "mine"}


@pytest.mark.parametrize("target,word", [("outputs", "not allowed"), ("../precious", "not allowed"),
                                         ("outputs/notes.txt", "a file")])
def test_a_notebook_run_by_papermill_refuses_the_same_folders(clone, target, word):
    declared = {"output_dir": "outputs/05", "results_root": "outputs", "threads": 0}
    nb.end_of_parameters(declared)
    with pytest.raises(nb.ConfigError, match=word):
        nb.parameters({**declared, "output_dir": target})
    assert files(clone / "outputs") == {"notes.txt": "mine"}


def test_a_new_output_folder_is_made_with_its_marker_and_may_be_used_again(clone):
    declared = {"output_dir": "outputs/new/05", "results_root": "outputs", "threads": 0}
    nb.end_of_parameters(declared)
    s = nb.parameters(dict(declared))
    assert (s.output_dir / paths.MARKER).is_file()
    (s.output_dir / "table.csv").write_text("x")
    nb.parameters(dict(declared))  # icl's own folder: accepted again


def test_remove_own_removes_only_what_icl_made(tmp_path):
    mine = paths.make_own(tmp_path / "mine")
    (mine / "a.png").write_bytes(b"x")
    paths.remove_own(mine)
    assert not mine.exists()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "b.txt").write_text("keep")
    with pytest.raises(paths.ConfigError, match="did not make"):
        paths.remove_own(theirs)
    assert (theirs / "b.txt").read_text() == "keep"
    (tmp_path / "empty").mkdir()
    paths.remove_own(tmp_path / "empty")  # an empty folder holds nothing to lose
    paths.remove_own(tmp_path / "absent")


def test_a_path_is_shown_relative_to_the_repository_only_when_it_lies_inside(tmp_path):
    from icl.running.paths import shown

    root = tmp_path / "repo"
    (root / "outputs").mkdir(parents=True)
    assert shown(root / "outputs" / "REPORT.md", root) == "outputs/REPORT.md"
    elsewhere = tmp_path / "runs" / "REPORT.md"  # an output root from $ICL_OUTPUT_ROOT
    assert shown(elsewhere, root) == str(elsewhere.resolve())  # relative_to raised ValueError here
