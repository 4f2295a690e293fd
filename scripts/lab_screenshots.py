"""Start the lab exactly as `make lab` does, open a notebook's .py source and an executed output in
headless Chromium (Debian's `chromium` or `chromium-headless-shell` package), and save screenshots.

    .venv/bin/python scripts/lab_screenshots.py [--out docs]

Shows what a reader gets from `make lab`: the repository at the root of the file browser, a `.py`
notebook opened (by double-click) as a notebook, and an executed copy with its figures.
"""
from __future__ import annotations

import argparse
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "icl-screenshots"
PAGES = {  # screenshot name: path under /lab/tree/
    "lab_notebook.png": "notebooks/03_difficult.py",
    "lab_executed_output.png": "outputs/01_easy_linear/01_easy_linear.ipynb",
}


def browser() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name) or (f"/usr/lib/chromium/{name}" if Path(f"/usr/lib/chromium/{name}").exists() else None)
        if path:
            return path
    sys.exit("no Chromium found: apt-get install chromium-headless-shell (or chromium)")


def lab_command() -> list[str]:
    subprocess.run(["make", "-s", "install"], cwd=ROOT, check=True)
    lines = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    return shlex.split(next(line for line in reversed(lines) if "jupyter lab" in line))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs", help="folder for the PNG files (default: docs)")
    p.add_argument("--wait", type=int, default=20000, help="milliseconds of page time before each shot (default: 20000)")
    args = p.parse_args()
    chrome = browser()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workspace = tempfile.mkdtemp(prefix="icl-lab-")  # a fresh layout: no tabs left from an earlier session
    cmd = lab_command() + [f"--port={port}", "--no-browser", f"--IdentityProvider.token={TOKEN}",
                           "--ServerApp.ip=127.0.0.1", f"--LabApp.workspaces_dir={workspace}"]
    lab = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=5)
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the lab did not start")
                time.sleep(0.5)
        out = ROOT / args.out
        out.mkdir(parents=True, exist_ok=True)
        for name, path in PAGES.items():
            url = f"http://127.0.0.1:{port}/lab/tree/{path}?token={TOKEN}&reset"
            profile = tempfile.mkdtemp(prefix="icl-chrome-")
            subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={profile}", "--window-size=1400,900", f"--virtual-time-budget={args.wait}",
                            f"--screenshot={out / name}", url], check=True, capture_output=True, timeout=180)
            shutil.rmtree(profile, ignore_errors=True)
            print(f"{out / name}: {path}")
    finally:
        lab.terminate()
        lab.wait(timeout=30)
        shutil.rmtree(workspace, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
