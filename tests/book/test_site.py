"""The built site: rebuilt from scratch with no network, then every page opened in headless Chromium
and checked for accessibility with axe-core.

The site is the one tests/support/site_build.py builds once per test run (the book's configuration, with the launch
links pointed at the JupyterHub test's servers) into _build/site-test, from the lessons' outputs of `make book`
or of this run's nbval runs, so no lesson runs again for it, and from the GPU runs kept in data/gpu-runs/ where one
ran a lesson's code. Each lesson page's stamp must be the stamp of the run it was built from, and its note must say
which GPU run it shows, or that the lesson's GPU run is out of date.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from tests.support.booktoc import toc_files
from tests.support.lesson_runs import run_in
from tests.support.site_build import HTML, SITE, note_problem, stamp_problem, the_test_site

SCREENSHOT = SITE / "screenshots" / "landing.png"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}

# What axe-core reports at these impacts fails a page. Left at lower impact, and accepted:
#  - region (moderate): the theme puts the sidebar's logo link outside every landmark; moving it means
#    replacing the theme's page layout.
#  - empty-table-header (minor): a pandas DataFrame's top-left corner cell, above the index, is empty.
FAILING_IMPACTS = {"critical", "serious"}
# axe-core counts label-content-name-mismatch as experimental and skips it unless asked; the theme's own
# buttons broke it (_templates/ says how), so it runs here to keep them fixed.
AXE_OPTIONS = {"resultTypes": ["violations"], "rules": {"label-content-name-mismatch": {"enabled": True}}}


@pytest.fixture(scope="module")
def site(request):
    """The test site, built offline when possible. Yields whether the build was offline."""
    record = the_test_site(request.session)
    if not record["offline"]:
        print(f"Built with the network available: {record['why_not']}")
    assert (HTML / "index.html").is_file()
    return {"offline": record["offline"], "why_not": record["why_not"], "outputs_from": record["outputs_from"],
            "built_from": record["built_from"], "run_here": run_in(request.session)}


def test_no_lesson_is_executed_again_for_the_site(site):
    """Each lesson nbval ran in this test run reaches the site with outputs it already has: `make test` executes a
    lesson once (the book's cache, after `make book`, or else nbval's run)."""
    executed = sorted(path.name for path in site["run_here"] if path.name not in site["outputs_from"])
    assert not executed, f"executed again for the test site: {executed} (see _build/site-test/lesson-runs/*.json)"


def test_book_builds_with_no_network(site):
    if not site["offline"]:
        pytest.skip(f"offline build not checked: {site['why_not']}")
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax must be served by the site"


@pytest.mark.parametrize("doc", [d for d in toc_files() if d.startswith("notebooks/")])
def test_each_lesson_page_is_stamped_under_its_title(site, doc):
    """What the page needs, and where and with what the build executed it, right under the title."""
    page = (HTML / f"{doc}.html").read_text(encoding="utf-8")
    title, stamp = page.find("<h1"), page.find("This page needs:")
    assert 0 <= title < stamp, f"{doc}: no stamp after the title"
    between = page[title:stamp]
    assert between.count("<p>") <= 1 and "In this lesson" not in between, f"{doc}: the stamp is not under the title"
    assert "Last executed:" in page[stamp:stamp + 600] and "PyTorch" in page[stamp:stamp + 600]


@pytest.mark.parametrize("doc", [d for d in toc_files() if d.startswith("notebooks/")])
def test_each_lesson_page_shows_the_stamp_and_note_of_the_run_it_was_built_from(site, doc):
    """The page's stamp (date, device, PyTorch) is the one in the run it was built from: the GPU run kept in
    data/gpu-runs/ that ran the lesson's code, else the book's cached run or this test run's nbval run; and the
    note under it names the GPU run, or the lesson's out-of-date one, or is absent where the lesson has none."""
    run = site["built_from"][f"{doc.split('/')[-1]}.ipynb"]
    page = (HTML / f"{doc}.html").read_text(encoding="utf-8")
    problems = [problem for problem in (stamp_problem(page, run), note_problem(page, run)) if problem]
    assert not problems, f"{doc} (built from {run['source']}): " + "; ".join(problems)


def test_the_stamp_check_fails_a_page_whose_stamp_is_not_its_runs():
    """A page built from the H100's run must show the H100's stamp: the CPU's, or another day's, fails."""
    h100 = {"date": "2026-11-26", "device": "cuda:0 (NVIDIA H100 80GB HBM3, 79.2 GiB)", "torch": "PyTorch 2.11.0+cu130"}
    run = {"source": "the GPU run data/gpu-runs/2026-11-26-h100-80gb-hbm3-cuda13", "stamp": h100,
           "gpu_run": "2026-11-26-h100-80gb-hbm3-cuda13", "outdated_run": None}

    def page(date, device):
        words = "</span> <span class=\"pre\">".join(device.split())
        return (f"<p><strong>This page needs:</strong> one GPU.<br />\n<strong>Last executed:</strong> {date} on "
                f"<code class=\"docutils literal\"><span class=\"pre\">{words}</span></code>, with PyTorch "
                f"2.11.0+cu130.</p>")

    assert stamp_problem(page("2026-11-26", h100["device"]), run) is None
    cpu = stamp_problem(page("2026-11-26", "cpu (AMD EPYC, 2 logical cores)"), run)
    assert cpu and "cpu (AMD EPYC, 2 logical cores)" in cpu and "the GPU run data/gpu-runs/" in cpu
    assert stamp_problem(page("2026-11-27", h100["device"]), run)
    assert "has no stamp" in stamp_problem(page("2026-11-26", h100["device"]), {**run, "stamp": None})
    assert "0 GPU-run note(s)" in note_problem(page("2026-11-26", h100["device"]), run)


def test_environment_check_page_says_which_device_it_ran_on(site):
    page = (HTML / "notebooks" / "00-environment-check.html").read_text(encoding="utf-8")
    assert "Running on " in page
    assert "Lessons will run on: " in page


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serving(directory: Path):
    """Serve ``directory`` on 127.0.0.1; yields its base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served_site(site):
    with serving(HTML) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Chromium is not installed: run `scripts/system-packages.sh` (make test runs it first)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        yield browser
        browser.close()


def accessibility_problems(page) -> list[str]:
    """axe-core's critical and serious violations on ``page``, each with the selectors of its elements."""
    problems = []
    for violation in Axe().run(page, options=AXE_OPTIONS).response["violations"]:
        if violation["impact"] in FAILING_IMPACTS:
            nodes = "; ".join(" ".join(map(str, node["target"])) for node in violation["nodes"])
            problems.append(f"accessibility: {violation['id']} ({violation['impact']}): {violation['help']}"
                            f" at {nodes}")
    return problems


def favicon_problem(page, url: str) -> str | None:
    """Why the page's icon would not load, if it would not: the icon the page links, or else the
    /favicon.ico a browser asks for.

    Chromium never fetches a favicon while Playwright routes the page's requests, so a missing one logs
    nothing here, while readers' browsers log a 404 on every first visit.
    """
    linked = page.evaluate("document.querySelector('link[rel~=\"icon\"]')?.href ?? null")
    icon = linked or urljoin(url, "/favicon.ico")
    parsed = urlparse(icon)
    if parsed.scheme not in ("http", "https"):
        return None  # a data: page has no site to ask, and a data: icon nothing to fetch
    if parsed.hostname not in LOOPBACK_HOSTS:
        return f"favicon from outside 127.0.0.1: {icon}"
    status = page.request.get(icon).status
    return f"favicon: HTTP {status}: {icon}" if status >= 400 else None


def visit(browser, url: str, screenshot: Path | None = None) -> list[str]:
    """Open ``url`` and return everything wrong with it: console errors, outside requests, broken images,
    maths left untypeset, a missing favicon, serious accessibility failures."""
    problems: list[str] = []
    page = browser.new_page()

    def keep_local(route):
        host = urlparse(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOOPBACK_HOSTS:
            route.continue_()
        else:
            problems.append(f"request leaving 127.0.0.1: {route.request.url}")
            route.abort()

    page.route("**/*", keep_local)
    # A failed load logs only its status; the location names the file.
    page.on("console", lambda msg: msg.type == "error"
            and problems.append(f"console error: {msg.text} ({msg.location.get('url') or url})"))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    page.goto(url, wait_until="networkidle")
    broken = page.evaluate(
        "Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    problems.extend(f"image not rendered: {src}" for src in broken)
    if favicon := favicon_problem(page, url):
        problems.append(favicon)
    if page.locator(".math").count():
        try:
            page.wait_for_selector("mjx-container", state="attached", timeout=20_000)
        except PlaywrightTimeout:
            problems.append("maths on the page was not typeset by MathJax")
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=False)
    # Taken before axe runs: it fetches the stylesheets itself to check the CSS, and resolves a nested
    # @import against the page instead of its stylesheet (the theme's ../basic.css becomes /basic.css).
    # Those 404s are axe's requests, not the page's.
    found = list(problems)
    found.extend(accessibility_problems(page))
    page.close()
    return found


@pytest.mark.parametrize("doc", toc_files())
def test_page_loads_cleanly_in_a_browser(doc, served_site, browser):
    assert (HTML / f"{doc}.html").is_file(), f"{doc} is in the toc but was not built"
    screenshot = SCREENSHOT if doc == toc_files()[0] else None
    problems = visit(browser, f"{served_site}/{doc}.html", screenshot)
    assert not problems, "\n".join(problems)


def test_some_page_has_maths_for_the_browser_test_to_check(site):
    """The offline-MathJax check above only means something while at least one page has maths."""
    assert any('class="math' in (HTML / f"{doc}.html").read_text(encoding="utf-8") for doc in toc_files())


@pytest.mark.parametrize(("page", "expected"), [
    ("data:text/html,<img src='https://example.org/a.png'><script>console.error('boom')</script>",
     ("request leaving 127.0.0.1: https://example.org/a.png", "console error: boom", "image not rendered")),
    # A serious accessibility violation: a disclosure whose <summary> has no text, as the theme's sidebar toggles
    # were before the fix.
    ("data:text/html,<html lang='en'><title>t</title><main><details><summary></summary>x</details></main>",
     ("accessibility: summary-name (serious)", "Summary elements must have discernible text at summary")),
], ids=["requests-console-images", "accessibility"])
def test_the_browser_check_itself_catches_what_it_looks_for(browser, page, expected):
    problems = "\n".join(visit(browser, page))
    assert [text for text in expected if text not in problems] == [], problems


def test_the_browser_check_catches_a_missing_favicon(browser, tmp_path):
    (tmp_path / "index.html").write_text("<html lang='en'><title>t</title><main><h1>t</h1></main></html>")
    with serving(tmp_path) as url:
        problems = "\n".join(visit(browser, f"{url}/index.html"))
    assert f"favicon: HTTP 404: {url}/favicon.ico" in problems
