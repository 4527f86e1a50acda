"""The built site: rebuilt from scratch with no network, then every page opened in headless Chromium.

The build reuses the execution cache in _build/.jupyter_cache, so notebooks run again only if they changed
(or on a fresh clone). Both tests share one build: the browser looks at what the offline build wrote.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from booktoc import ROOT, toc_files
from netns import loopback_namespace_prefix
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

BUILD = ROOT / "_build"
HTML = BUILD / "html"
SCREENSHOT = BUILD / "screenshots" / "landing.png"
JUPYTER_BOOK = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "-W", "-n", "--keep-going",
                "--all"]
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


@pytest.fixture(scope="module")
def site():
    """Rebuild the HTML from scratch, offline when possible. Yields whether the build was offline."""
    for stale in (HTML, BUILD / ".doctrees", BUILD / "jupyter_execute"):
        shutil.rmtree(stale, ignore_errors=True)
    prefix, why_not = loopback_namespace_prefix()
    command = JUPYTER_BOOK if prefix is None else [*prefix, *JUPYTER_BOOK]
    if prefix is None:
        print(f"Building with the network available: {why_not}")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"book build failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert (HTML / "index.html").is_file()
    return {"offline": prefix is not None, "why_not": why_not}


def test_book_builds_with_no_network(site):
    if not site["offline"]:
        pytest.skip(f"offline build not checked: {site['why_not']}")
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax must be served by the site"


def test_environment_check_page_says_which_device_it_ran_on(site):
    page = (HTML / "notebooks" / "00-environment-check.html").read_text(encoding="utf-8")
    assert "Running on " in page
    assert "Lessons will run on: " in page


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def served_site(site):
    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Chromium is not installed: `apt-get install chromium` (.ci/run does this on CI)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        yield browser
        browser.close()


def visit(browser, url: str, screenshot: Path | None = None) -> list[str]:
    """Open ``url`` and return everything wrong with it: console errors, outside requests, broken images,
    maths left untypeset."""
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
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console error: {msg.text}"))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    page.goto(url, wait_until="networkidle")
    broken = page.evaluate(
        "Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    problems.extend(f"image not rendered: {src}" for src in broken)
    if page.locator(".math").count():
        try:
            page.wait_for_selector("mjx-container", timeout=20_000)
        except PlaywrightTimeout:
            problems.append("maths on the page was not typeset by MathJax")
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=False)
    page.close()
    return problems


@pytest.mark.parametrize("doc", toc_files())
def test_page_loads_cleanly_in_a_browser(doc, served_site, browser):
    assert (HTML / f"{doc}.html").is_file(), f"{doc} is in the toc but was not built"
    screenshot = SCREENSHOT if doc == toc_files()[0] else None
    problems = visit(browser, f"{served_site}/{doc}.html", screenshot)
    assert not problems, "\n".join(problems)


def test_some_page_has_maths_for_the_browser_test_to_check(site):
    """The offline-MathJax check above only means something while at least one page has maths."""
    assert any('class="math' in (HTML / f"{doc}.html").read_text(encoding="utf-8") for doc in toc_files())


def test_the_browser_check_itself_catches_what_it_looks_for(browser):
    page = "data:text/html,<img src='https://example.org/a.png'><script>console.error('boom')</script>"
    problems = "\n".join(visit(browser, page))
    assert "request leaving 127.0.0.1: https://example.org/a.png" in problems
    assert "console error: boom" in problems
    assert "image not rendered" in problems
