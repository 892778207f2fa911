"""The HTML reports as a reader sees them: rendered by headless Chromium, offline.

Every page must show its images (each ``<img>`` loaded, natural width > 0), every local link and image
must resolve, and no page may show a traceback or a stderr output (warnings), a code cell unfolded (a report
page folds each code input in a closed ``<details>``) or text that scrolls sideways (a caption in a code box).
Checked on report pages built here from a small fixture notebook (executed by papermill, as the pipeline
does), on the committed ``reports/`` once they carry figures, and on the page of ``dvc plots show`` with the
offline template.

Chromium is driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``): no driver, no
download. The browser checks are skipped where Chromium is not installed (Debian: ``apt-get install -y
chromium``; ``make setup`` installs it).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from .conftest import ROOT

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
NO_CHROMIUM = ("Chromium is not installed (Debian package `chromium`: `apt-get install -y chromium`, or `make setup` "
               "as root)")

# What a page shows, collected in the page once it has loaded (charts: vega draws after the load event)
_INSPECT = """(() => {
  // shown: rendered and not inside a closed <details> (whose content has boxes but is not displayed)
  const shown = e => e.checkVisibility ? e.checkVisibility() : e.getClientRects().length > 0;
  const stderr = document.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]');
  return {
    images: [...document.images].map(i => ({src: i.currentSrc || i.src, width: i.naturalWidth, done: i.complete})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.name),
    text: document.body ? document.body.innerText : '',
    stderr: [...stderr].map(e => e.innerText.slice(0, 300)),
    charts: document.querySelectorAll('svg.marks, canvas.marks').length,
    code: [...document.querySelectorAll('.input_area, .jp-InputArea')].filter(shown).length,
    folded: document.querySelectorAll('details.code:not([open]) .input_area').length,
    sideways: [...document.querySelectorAll('pre')].filter(e => shown(e) && e.scrollWidth > e.clientWidth + 1)
                                                    .map(e => e.innerText.slice(0, 80)),
    verdictsFirst: (() => {  // the verdicts box comes before the first code cell
      const v = document.querySelector('.verdicts'), c = document.querySelector('.code_cell');
      return !!v && (!c || !!(v.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING));
    })(),
  };
})()"""


class Chromium:
    """Headless Chromium and the few DevTools calls the checks need (JSON messages ending in NUL on fds 3/4)."""

    def __init__(self, profile: Path) -> None:
        to_chrome, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome = os.pipe()

        def child_fds() -> None:  # the protocol's fixed descriptors: 3 is read by Chromium, 4 written
            read_end, write_end = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome, from_chrome))
            os.dup2(read_end, 3)  # (via fds >= 10: the pipes themselves may be 3 or 4)
            os.dup2(write_end, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--allow-file-access-from-files", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=child_fds)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._next_id, self._events = b"", 0, []

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise TimeoutError(f"no answer from Chromium within {timeout:.0f} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self._events.append(reply)

    def _wait_event(self, method: str, session: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    del self._events[i]
                    return
            self._events.append(self._read(max(0.1, deadline - time.monotonic())))

    def inspect(self, url: str, charts: int = 0, timeout: float = 60) -> dict:
        """Open ``url`` in a new tab, wait for its load event (and for ``charts`` charts), return what it shows."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.call("Page.enable", session=session)
            self._events.clear()
            self.call("Page.navigate", {"url": url}, session=session)
            self._wait_event("Page.loadEventFired", session, timeout)
            deadline = time.monotonic() + timeout
            while True:
                page = self.call("Runtime.evaluate", {"expression": _INSPECT, "returnByValue": True},
                                 session=session)["result"]["value"]
                if page["charts"] >= charts or time.monotonic() > deadline:
                    return page
                time.sleep(0.2)
        finally:
            self.call("Target.closeTarget", {"targetId": target})

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    chromium = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chromium
    chromium.close()


def page_problems(page: dict, url: str, machine_paths: tuple[str, ...] = ()) -> list[str]:
    """Everything a reader would see broken on a page: images, local links and anchors, tracebacks, stderr."""
    problems = [f"image not loaded: {i['src'][:120]}" for i in page["images"] if not (i["done"] and i["width"] > 0)]
    here = urlparse(url)
    for link in page["links"]:
        parsed = urlparse(link)
        if parsed.scheme != "file":
            continue  # http(s) links are not followed offline; data: and javascript: are not links to resolve
        if parsed.path == here.path:
            if parsed.fragment and unquote(parsed.fragment) not in page["ids"]:
                problems.append(f"anchor not on the page: #{parsed.fragment}")
        elif not Path(unquote(parsed.path)).exists():
            problems.append(f"link does not resolve: {link}")
    if re.search(r"Traceback \(most recent call last\)|An Exception was encountered", page["text"]):
        problems.append("the page shows a traceback")
    problems += [f"stderr output shown: {text!r}" for text in page["stderr"]]
    problems += [f"machine path shown: {path}" for path in machine_paths if path in page["text"]]
    if page["code"]:
        problems.append(f"{page['code']} code cell(s) shown unfolded")
    problems += [f"text scrolls sideways: {text!r}" for text in page["sideways"]]
    return problems


FIXTURE = '''# %% [markdown]
# # Fixture report
#
# What the report notebooks do: a table with long text, a figure with a title over two panels, a verdict.

# %% tags=["parameters"]
reports_dir = "reports"

# %%
from isogclr.reports.notebook_run import setup_report

setup_report()
import matplotlib.pyplot as plt
import pandas as pd
import tqdm.auto  # noqa: F401  (imported by torch's neighbours in the real reports; warns without setup_report)

from isogclr.analysis.tables import cell, save_figure
from isogclr.analysis.verdicts import STATUSES, Verdict, write_verdicts

# %%
pd.DataFrame({"claim": ["would cut it with an ellipsis " * 3],
              "ours": [cell(61.234, 0.0, n=1)], "paper": [cell(88.7, 0.18)]})

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(6, 2.6))
left.plot([1, 2, 3], [3, 1, 2], "o-")
left.set(xlabel="a long x label under the left panel", ylabel="top-1 (%)", title="left panel")
right.bar(["a", "b"], [1, 2])
right.set(xlabel="a long x label under the right panel", ylabel="count", title="right panel")
fig.suptitle("A figure title above two panel titles")
save_figure(fig, reports_dir, "fixture_figure")

# %%
write_verdicts([Verdict("the fixture's claim", STATUSES[-1], "nothing to test")], reports_dir, "fixture")
'''


@pytest.fixture(scope="module")
def fixture_reports(tmp_path_factory) -> Path:
    """A repository-shaped folder whose reports/ holds one executed fixture report, its HTML page and the index."""
    from isogclr.reports.index import build_index
    from isogclr.reports.notebook_build import build_notebooks
    from isogclr.reports.notebook_run import execute_report

    repo = tmp_path_factory.mktemp("repo")
    (repo / "params.yaml").write_text("profile: fixture\n")
    (repo / "dvc.yaml").write_text("stages: {}\n")
    (repo / "notebooks" / "src").mkdir(parents=True)
    (repo / "notebooks" / "src" / "fixture.py").write_text(FIXTURE)
    built = build_notebooks(repo / "notebooks" / "src", repo / "notebooks")
    assert built == [str(repo / "notebooks" / "fixture.ipynb")]
    execute_report(repo / "notebooks" / "fixture.ipynb", repo / "reports" / "fixture.ipynb",
                   {"reports_dir": "reports"}, cwd=repo)
    build_index(repo / "reports", ["fixture"], profile="fixture")
    return repo / "reports"


def test_fixture_report_shows_its_figure_without_warnings_or_timestamps(fixture_reports):
    nb = json.loads((fixture_reports / "fixture.ipynb").read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) == 1 and figures[0]["metadata"]["image/png"]["isogclr_figure"] == "figures/fixture_figure.png"
    assert not [o for o in outputs if o.get("name") == "stderr"], "a warning was printed"
    assert not any("PosixPath" in json.dumps(o.get("data", {})) for o in outputs)
    text = json.dumps(nb, ensure_ascii=False)
    assert "start_time" not in text and "end_time" not in text and '"duration"' not in text
    assert "iopub" not in text and "..." not in json.dumps(outputs)
    assert "61.23 (n=1)" in text and "88.70 ± 0.18" in text
    index = (fixture_reports / "index.html").read_text()
    assert '<img class="thumb" src="figures/fixture_figure.png"' in index  # the report's thumbnail
    page = (fixture_reports / "html" / "fixture.html").read_text()
    assert 'href="../index.html"' in page and 'src="../figures/fixture_figure.png"' in page


def test_fixture_pages_render_in_chromium(browser, fixture_reports):
    index = (fixture_reports / "index.html").as_uri()
    page = browser.inspect(index)
    assert page_problems(page, index) == []
    assert [i["src"] for i in page["images"]] == [(fixture_reports / "figures" / "fixture_figure.png").as_uri()]
    report = (fixture_reports / "html" / "fixture.html").as_uri()
    assert report in page["links"]
    shown = browser.inspect(report)
    machine = (str(ROOT), str(fixture_reports.parent), "site-packages")
    assert page_problems(shown, report, machine) == []
    assert len(shown["images"]) == 1 and shown["images"][0]["width"] == 600  # 6 in at 100 dpi
    assert shown["images"][0]["src"] == (fixture_reports / "figures" / "fixture_figure.png").as_uri()  # not base64
    assert index in shown["links"]  # back to the index
    assert "PosixPath" not in shown["text"]  # the figure cell shows the figure, not the path it was saved to
    assert ("would cut it with an ellipsis " * 3).strip() in shown["text"]  # the whole cell, not cut
    code_cells = [c for c in json.loads((fixture_reports / "fixture.ipynb").read_text())["cells"]
                  if c["cell_type"] == "code"]
    assert shown["code"] == 0 and shown["folded"] == len(code_cells)  # every input folded, parameters included
    assert shown["verdictsFirst"]
    assert "setup_report" not in shown["text"]
    claim, verdicts = shown["text"].index("Fixture report"), shown["text"].index("Verdicts")
    assert claim < verdicts < shown["text"].index("would cut it")  # the claim, its verdicts, then the report


def test_a_broken_page_is_caught(browser, tmp_path):
    """The checks can fail: a missing image, a dead link and a traceback are each reported."""
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="missing.png"><a href="nowhere.html">x</a><a href="#gone">y</a>'
                    "<pre>Traceback (most recent call last):\n  ValueError</pre>"
                    '<div class="input_area"><pre>x = 1</pre></div>'
                    f'<pre style="width:300px;overflow-x:auto">{"a caption that does not wrap " * 20}</pre>'
                    "</body></html>")
    problems = page_problems(browser.inspect(page.as_uri()), page.as_uri())
    assert len(problems) == 6, problems
    assert "1 code cell(s) shown unfolded" in problems and any(p.startswith("text scrolls") for p in problems)


def _committed_pages() -> list[Path]:
    return [ROOT / "reports" / "index.html", *sorted((ROOT / "reports" / "html").glob("*.html"))]


@pytest.mark.skipif(not any("<img" in p.read_text() for p in _committed_pages()[1:] if p.exists()),
                    reason="the committed reports carry no figures yet: they are added by the next pipeline run")
@pytest.mark.parametrize("path", _committed_pages(), ids=lambda p: p.name)
def test_committed_report_pages_render_in_chromium(browser, path):
    url = path.as_uri()
    page = browser.inspect(url)
    assert page_problems(page, url, (str(ROOT), "site-packages")) == []
    if path.name == "index.html":
        assert len(page["images"]) >= len(_committed_pages()) - 1  # a thumbnail per report
    else:
        assert page["images"], f"{path.name} shows no figure"
        assert page["folded"] > 0 and page["code"] == 0, "the code cells are not folded"
        assert page["verdictsFirst"], "the verdicts are not up front"
        assert (ROOT / "reports" / "index.html").as_uri() in page["links"]


def test_dvc_plots_page_draws_charts_offline(browser, tmp_path):
    """``dvc plots show --html-template reports/templates/plots.html`` draws with the local vega libraries."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "reports" / "templates", project / "reports" / "templates")
    (project / "log.csv").write_text("step,loss\n0,2.0\n1,1.5\n2,1.2\n")
    dvc = [str(Path(sys.executable).parent / "dvc")]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=project, check=True, env=env)
    subprocess.run([*dvc, "plots", "show", "log.csv", "-x", "step", "-y", "loss",
                    "--html-template", "reports/templates/plots.html"], cwd=project, check=True, env=env,
                   capture_output=True)
    html = (project / "dvc_plots" / "index.html").read_text()
    assert "cdn.jsdelivr" not in html and "vega-embed.min.js" in html
    url = (project / "dvc_plots" / "index.html").as_uri()
    page = browser.inspect(url, charts=1)
    assert page["charts"] >= 1, "no chart drawn"
    assert page_problems(page, url) == []
