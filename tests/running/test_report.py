"""REPORT.md and claims.json are assembled from the notebooks' results.json files."""
import json

import pytest

from icl.running.reproduce import write_report


def claim(cid, figure):
    return {"id": cid, "claim": f"claim {cid}", "criterion": "x < 1", "status": "partly reproduced",
            "measured": {"x": 0.123456}, "figure": figure}


def test_report_orders_claims_and_flags_missing_figures(tmp_path):
    base = tmp_path / "outputs" / "ci"
    for name, claims in {"01_easy_linear": [claim("C10", "outputs/ci/01_easy_linear/a.png")],
                         "03_difficult": [claim("C6b", "outputs/ci/03_difficult/b.png"),
                                          claim("C6a", "outputs/ci/03_difficult/gone.png")]}.items():
        (base / name).mkdir(parents=True)
        (base / name / "results.json").write_text(json.dumps({"claims": claims}))
    (base / "01_easy_linear" / "a.png").write_bytes(b"png")
    (base / "03_difficult" / "b.png").write_bytes(b"png")

    text = write_report(tmp_path, "ci").read_text()

    ids = [row["id"] for row in json.loads((base / "claims.json").read_text())["claims"]]
    assert ids == ["C6a", "C6b", "C10"]
    assert "[a.png](01_easy_linear/a.png)" in text and "[b.png](03_difficult/b.png)" in text
    assert "gone.png (missing" in text and "(03_difficult/gone.png)" not in text
    assert "Also recorded: x 0.123." in text  # the number, in its claim's section


def test_report_gives_each_notebooks_time_and_how_many_runs_it_trained(tmp_path):
    base = tmp_path / "outputs" / "ci"
    base.mkdir(parents=True)
    (base / "timings.json").write_text(json.dumps({"02_b": {"seconds": 12.4, "runs_trained": 0},
                                                   "01_a": {"seconds": 300.0, "runs_trained": 42},
                                                   "03_c": {"seconds": 5.0, "runs_trained": None},
                                                   "total": {"seconds": 312.0, "jobs": 2, "notebooks": ["01_a", "02_b", "03_c"],
                                                             "finished": "2026-12-02 01:00 UTC"}}))
    text = write_report(tmp_path, "ci").read_text()
    assert ("01_a 300 s (42 runs trained), 02_b 12 s (0 runs trained), 03_c 5 s (no run cache).") in text
    assert "(3 notebooks, --jobs 2) took 5.2 min of wall time, finished 2026-12-02 01:00 UTC" in text


def test_a_ci_report_says_first_that_its_verdicts_only_test_the_pipeline(tmp_path):
    (tmp_path / "outputs" / "ci").mkdir(parents=True)
    first = write_report(tmp_path, "ci").read_text().splitlines()[0]
    assert "verdicts only test the pipeline" in first
    assert "pipeline" not in write_report(tmp_path, "quick").read_text()
    smoke = tmp_path / "outputs" / "smoke" / "quick"
    smoke.mkdir(parents=True)
    assert "verdicts only test the pipeline" in write_report(tmp_path, "quick", smoke).read_text().splitlines()[0]


def test_executed_notebooks_carry_no_absolute_paths(tmp_path):
    import nbformat

    from icl.running.reproduce import relative_paths

    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(tmp_path / "notebooks" / "a.ipynb"),
                                "output_path": str(tmp_path / "outputs" / "a" / "a.ipynb")}
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    relative_paths(path, tmp_path)
    meta = nbformat.read(path, as_version=4).metadata["papermill"]
    assert meta == {"input_path": "notebooks/a.ipynb", "output_path": "outputs/a/a.ipynb"}


def test_executed_notebooks_carry_no_timestamps_or_random_ids(tmp_path):
    import nbformat

    from icl.running.reproduce import relative_paths

    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"start_time": "2026-11-29T23:42:37", "end_time": "x", "duration": 6.8, "version": "2.7.0"}
    injected = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["injected-parameters"]})
    plain = nbformat.v4.new_code_cell("y = 2", metadata={"execution": {"iopub.execute_input": "2026-11-29T23:42:37Z"},
                                                        "papermill": {"duration": 1.9, "status": "completed"}})
    nb.cells = [injected, plain]
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    relative_paths(path, tmp_path)
    first = path.read_text()
    back = nbformat.read(path, as_version=4)
    assert back.metadata["papermill"] == {"version": "2.7.0"}
    assert back.cells[0].id == "injected-parameters"
    assert back.cells[1].metadata == {"papermill": {"status": "completed"}}
    relative_paths(path, tmp_path)
    assert path.read_text() == first


def test_a_docs_page_in_the_report_keeps_its_links_working_from_the_reports_folder(tmp_path):
    from icl.running.report import included

    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "limits.md"
    page.write_text("# Title\n\nSee [a](training_protocol.md#x), [b](../outputs/REPORT.md), [c](https://x.org), [d](#here).\n")
    text = included(page, tmp_path / "outputs")
    assert "## Title" in text and "[a](../docs/training_protocol.md#x)" in text
    assert "[b](REPORT.md)" in text and "[c](https://x.org)" in text and "[d](#here)" in text
    deeper = included(page, tmp_path / "outputs" / "paper_slice")  # a profile's report, one folder down
    assert "[a](../../docs/training_protocol.md#x)" in deeper and "[b](../REPORT.md)" in deeper
    assert included(tmp_path / "absent.md", tmp_path / "outputs") == ""


def test_icl_report_rewrites_the_report_from_results_on_disk_running_nothing(tmp_path, monkeypatch, capsys):
    from icl.running.cli import main

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "icl").mkdir()  # what icl.running.paths.repo_root looks for
    base = tmp_path / "outputs" / "ci" / "03_difficult"
    base.mkdir(parents=True)
    (base / "results.json").write_text(json.dumps({"claims": [claim("C4", "outputs/ci/03_difficult/a.png")]}))
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--profile", "ci"]) == 0
    text = (tmp_path / "outputs" / "ci" / "REPORT.md").read_text()
    assert "| C4: softmax, top-2: loss \\~ 1/L | partly |" in text
    assert json.loads((base.parent / "claims.json").read_text())["claims"][0]["id"] == "C4"
    assert main(["report", "--profile", "paper"]) == 2  # nothing to report on: one line, no traceback
    assert "no folder" in capsys.readouterr().err


def test_an_unreadable_results_json_costs_its_claims_not_the_report(tmp_path):
    """A results.json with merge-conflict markers made write_report raise (JSONDecodeError): no
    REPORT.md, no claims.json for any notebook."""
    base = tmp_path / "outputs" / "ci"
    for name in ("01_easy_linear", "03_difficult", "06_regimes"):
        (base / name).mkdir(parents=True)
    (base / "01_easy_linear" / "results.json").write_text(json.dumps({"claims": [claim("C1", "")]}))
    conflict = '<<<<<<< HEAD\n{"claims": []}\n=======\n{"claims": []}\n>>>>>>> theirs\n'
    (base / "03_difficult" / "results.json").write_text(conflict)
    (base / "06_regimes" / "results.json").write_bytes(b'{"claims": [')  # cut off

    text = write_report(tmp_path, "ci").read_text()

    assert [row["id"] for row in json.loads((base / "claims.json").read_text())["claims"]] == ["C1"]
    assert "`03_difficult/results.json` cannot be read" in text and "`06_regimes/results.json` cannot be read" in text
    assert "icl reproduce --only 03_difficult" in text


def test_icl_report_names_and_leaves_an_unreadable_timings_json(tmp_path, monkeypatch, capsys):
    """`icl report` read timings.json as it was: merge-conflict markers in it raised
    JSONDecodeError, and no report was written; then it deleted it. It runs nothing: it leaves it."""
    from icl.running import report

    base = tmp_path / "outputs" / "ci"
    (base / "01_easy_linear").mkdir(parents=True)
    (base / "01_easy_linear" / "results.json").write_text(json.dumps({"claims": [claim("C1", "")]}))
    (base / "timings.json").write_text("<<<<<<< HEAD\n{}\n=======\n")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "icl").mkdir()
    monkeypatch.chdir(tmp_path)

    assert report.run(type("Args", (), {"profile": "ci", "outputs": None})()) == 0

    assert "timings.json could not be read" in capsys.readouterr().out
    assert (base / "timings.json").read_text() == "<<<<<<< HEAD\n{}\n=======\n" and "C1" in (base / "REPORT.md").read_text()


@pytest.mark.slow
def test_every_results_file_records_its_commit_versions_device_and_date():
    from icl.running.files import provenance

    p = provenance("cpu")
    assert set(p) == {"commit", "python", "torch", "numpy", "device", "date"} and p["device"] == "cpu"
    assert p["torch"] and p["numpy"] and p["date"].endswith("Z")
    assert p["commit"] is None or len(p["commit"].split("+")[0]) == 40
