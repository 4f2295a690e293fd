"""The results website in a real browser: every page of build/site/ loads in headless Chromium and
every image it shows is served (HTTP 200, an image). Run by `make test-site`, which builds the site
first and sets ICL_SITE_TEST; `make test` skips this module (no site, maybe no browser there).

The report page's screenshot in docs/ is taken the same way (see `screenshot`):
    .venv/bin/python -c 'import tests.running.test_site as t; t.save_report_screenshot("docs/site_report.png")'
"""
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]  # not conftest's: the screenshot above runs outside pytest
SITE = ROOT / "build" / "site"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless, and quiet on this machine's closed network: no background connections at all.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]

pytestmark = pytest.mark.skipif(not os.environ.get("ICL_SITE_TEST"), reason="browser test: run `make test-site`")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # one line per request would drown pytest's output
        pass


@contextmanager
def serve(root: Path):
    """Serve `root` on 127.0.0.1 at a free port; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _chromium(*args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:  # a new, empty profile for every start
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def dump_dom(url: str) -> str:
    """The page's DOM after Chromium loaded it (scripts run)."""
    done = _chromium("--dump-dom", url)
    assert done.returncode == 0, f"chromium exited {done.returncode} on {url}: {done.stderr[-500:]}"
    return done.stdout


def screenshot(url: str, png: Path, size: str = "1280,1800") -> None:
    done = _chromium(f"--screenshot={png}", f"--window-size={size}", url)
    assert done.returncode == 0 and png.stat().st_size > 0, f"no screenshot of {url}: {done.stderr[-500:]}"


def save_report_screenshot(png: str) -> None:
    with serve(SITE) as base:
        screenshot(base + "outputs/REPORT.html", Path(png).resolve())


class _Page(HTMLParser):
    """The title and every <img>'s src of an HTML document."""

    def __init__(self):
        super().__init__()
        self.title, self.images, self._in_title = "", [], False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get_content_type(), r.read()
    except urllib.error.HTTPError as e:
        return e.code, "", b""


def check_page(url: str) -> tuple[list[str], list[str]]:
    """(problems, image URLs) of one page: it must be served and render, and each <img> must be
    served by the same server as an image. Empty problems: the page is whole."""
    status, _, _ = _get(url)
    if status != 200:
        return [f"{url}: HTTP {status}"], []
    page = _Page()
    page.feed(dump_dom(url))
    problems = [] if page.title.strip() else [f"{url}: rendered without a title"]
    images = []
    for src in page.images:
        if src.startswith("data:image/"):
            continue  # inline, nothing to fetch
        image = urljoin(url, src)
        images.append(image)
        if urlsplit(image).netloc != urlsplit(url).netloc:
            problems.append(f"{url}: image {src} comes from another host")
            continue
        status, kind, body = _get(image)
        if status != 200 or not kind.startswith("image/") or not body:
            problems.append(f"{url}: image {src} missing (HTTP {status}, {kind or 'no type'}, {len(body)} bytes)")
    return problems, images


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


def _notebooks() -> dict[str, int]:
    """{page of each executed notebook in outputs/: how many figures it saved as outputs}."""
    out = {}
    for nb in sorted(ROOT.glob("outputs/[0-9][0-9]_*/[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        out[f"outputs/{nb.parent.name}/{nb.stem}.html"] = figures
    return out


def _docs() -> list[str]:
    return [f"docs/{md.stem}.html" for md in sorted(ROOT.glob("docs/*.md"))]


def test_every_page_of_the_site_loads_with_all_its_images():
    assert (SITE / "index.html").is_file(), f"no site in {SITE}: run `make site`"
    pages = _pages(SITE)
    wanted = {"index.html", "outputs/REPORT.html", *_notebooks(), *_docs()}
    assert wanted <= set(pages), f"pages missing from the site: {sorted(wanted - set(pages))}"
    shown, problems = {}, []
    with serve(SITE) as base, ThreadPoolExecutor(2) as pool:  # two browsers at once: half the time
        for page, (found, images) in zip(pages, pool.map(lambda p: check_page(base + p), pages)):
            problems += found
            shown[page] = len(images)
    assert not problems, "\n".join(problems)
    # Figures inline: each notebook page shows at least the figures its notebook saved, and the
    # report every figure it embeds.
    report_figures = len(re.findall(r"!\[[^\]]*\]\([^)\s]+\)", (ROOT / "outputs" / "REPORT.md").read_text()))
    short = {p: (shown[p], n) for p, n in {**_notebooks(), "outputs/REPORT.html": report_figures}.items() if shown[p] < n}
    assert not short, f"pages showing fewer images than their source holds (shown, in source): {short}"


def test_the_index_links_every_page():
    index = (SITE / "index.html").read_text()
    unlinked = [p for p in ["outputs/REPORT.html", *_notebooks(), *_docs()] if f'href="{p}' not in index]
    assert not unlinked, f"index.html does not link: {unlinked}"


def test_a_missing_image_or_page_fails_the_check(tmp_path):
    png = (SITE / "_static").glob("*.png")
    real = next(iter(sorted(ROOT.glob("outputs/[0-9][0-9]_*/*.png"))), None) or next(png)
    shutil.copy(real, tmp_path / "here.png")
    (tmp_path / "ok.html").write_text('<html><head><title>ok</title></head><body><img src="here.png"></body></html>')
    (tmp_path / "bad.html").write_text(
        '<html><head><title>bad</title></head><body><img src="here.png"><img src="gone.png"></body></html>')
    with serve(tmp_path) as base:
        assert check_page(base + "ok.html") == ([], [base + "here.png"])
        problems, _ = check_page(base + "bad.html")
        assert len(problems) == 1 and "gone.png missing (HTTP 404" in problems[0], problems
        assert check_page(base + "absent.html")[0] == [base + "absent.html: HTTP 404"]


def test_report_page_screenshot(tmp_path):
    with serve(SITE) as base:
        screenshot(base + "outputs/REPORT.html", tmp_path / "report.png")
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_dead_link_fails_the_build(tmp_path):
    """The build is strict: the sources `make site` staged, with one link to a file that is not
    there, do not build (and build without it)."""
    sphinx = next(line for line in subprocess.run(["make", "-n", "site"], cwd=ROOT, capture_output=True,
                                                  text=True, check=True).stdout.splitlines() if "sphinx-build" in line)
    assert " -W " in sphinx, sphinx
    src = tmp_path / "src"
    shutil.copytree(ROOT / "build" / "site-src", src)

    def build() -> subprocess.CompletedProcess:
        return subprocess.run([str(ROOT / ".venv" / "bin" / "sphinx-build"), "-q", "-W", "--keep-going", "-b", "html",
                               "-c", str(ROOT / "website"), str(src), str(tmp_path / "site")],
                              capture_output=True, text=True, timeout=600)
    assert build().returncode == 0
    with open(src / "docs" / "tests.md", "a") as f:
        f.write("\nSee [the missing study](../outputs/studies/no_such_study.json).\n")
    done = build()
    assert done.returncode != 0 and "no_such_study" in done.stderr, done.stderr[-2000:]


def test_each_notebook_page_shows_one_parameter_cell():
    """The run's values (papermill's injected cell), not also the notebook's defaults beside them."""
    for page in _notebooks():
        html = (SITE / page).read_text()
        assert html.count("tag_injected-parameters") == 1 and "tag_parameters" not in html, page
