"""`make lab` starts (as root too) at the repository root, so notebooks/ and the executed copies in
outputs/ are both reachable, and .py notebooks open with jupytext's notebook view: checked through
the Jupyter server's REST API, with the exact command `make lab` runs."""
import json
import shlex
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import ROOT

TOKEN = "icl-test-token"
pytestmark = pytest.mark.slow  # every test here starts a Jupyter server


def lab_command() -> list[str]:
    """The last command of `make -n lab` (the jupyter one), after `make install` wrote the lab's settings."""
    subprocess.run(["make", "-s", "install"], cwd=ROOT, check=True, capture_output=True)
    lines = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    command = shlex.split(next(line for line in reversed(lines) if "jupyter lab" in line))
    assert "--allow-root" in command
    return command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={TOKEN}", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("lab") / "lab.log"
    cmd = lab_command() + [f"--port={port}", "--no-browser", f"--IdentityProvider.token={TOKEN}",
                           "--ServerApp.ip=127.0.0.1"]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get(port, "/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the lab did not start:\n" + log.read_text()[-3000:])
                time.sleep(0.5)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_lab_serves_the_repository_root(lab):
    top = {item["name"] for item in get(lab, "/api/contents/")["content"]}
    assert {"notebooks", "outputs", "README.md"} <= top


def test_notebooks_and_their_executed_copies_are_reachable(lab):
    names = [item["name"] for item in get(lab, "/api/contents/notebooks")["content"]]
    # one entry per notebook (its .py); the paired .ipynb is left out of the listing but opens by path
    assert sorted(names) == sorted(p.name for p in (ROOT / "notebooks").glob("*.py")), names
    assert get(lab, "/api/contents/notebooks/01_easy_linear.ipynb")["type"] == "notebook"
    executed = get(lab, "/api/contents/outputs/01_easy_linear/01_easy_linear.ipynb")
    assert executed["type"] == "notebook" and executed["content"]["cells"]


def test_python_files_open_with_the_jupytext_notebook_view(lab):
    settings = get(lab, "/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
    viewers = settings["schema"]["properties"]["defaultViewers"]["default"]
    assert viewers.get("python") == "Jupytext Notebook", viewers


def test_the_lab_asks_no_question_about_jupyter_news(lab):
    props = get(lab, "/lab/api/settings/@jupyterlab/apputils-extension:notification")["schema"]["properties"]
    assert props["fetchNews"]["default"] == "false" and props["checkForUpdates"]["default"] is False, props
