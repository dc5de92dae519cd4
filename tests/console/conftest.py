"""Console tests: the page in headless Chromium (Debian's `chromium`, driven by Playwright's
Python package; never a browser Playwright downloads) against a real stack on a tiny random
model: the runtime, the worker and the console as children of samevm.supervisor.Stack.

`pytest tests/console --console-screenshots docs` also writes the README's screenshots."""
from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from dev.synthetic import Shape
from tests.stack_fixtures import stack_settings, tiny_stack

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDE, NARROW = (1280, 860), (390, 844)


def pytest_addoption(parser):
    parser.addoption("--console-screenshots", metavar="DIR", default=None,
                     help="save the console's screenshots (console-*.png) into DIR")


@pytest.fixture(scope="module")   # a module at most: sync Playwright holds an event loop in the main thread until it stops
def chromium():
    """Playwright's Chromium API on the system browser; skips with the reason when either is missing."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed: `make setup` installs it as root "
                    "(apt-get install chromium), or install it yourself")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
                                    args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def stack(tiny_gguf, tmp_path_factory):
    """(Stack, Settings, docs dir) with the console on; the model file lies in the docs dir, which
    the worker may read, so a fine-tune can name it as its base."""
    root = tmp_path_factory.mktemp("console")
    docs = root / "docs"
    docs.mkdir()
    model = docs / "tiny.gguf"
    model.write_bytes(Path(tiny_gguf("qwen2", shape=Shape(context=4096))).read_bytes())
    settings = stack_settings(root / "home", str(model))
    with tiny_stack(settings, docs=docs, console=True) as s:
        yield s, settings, docs


@pytest.fixture(scope="module")
def context(chromium):
    """One browser context for the module: localStorage (the chat) lasts from test to test."""
    ctx = chromium.new_context(viewport={"width": WIDE[0], "height": WIDE[1]})
    ctx.set_default_timeout(60_000)
    yield ctx
    ctx.close()


@pytest.fixture
def open_console(context):
    """open_console(url) -> a page with the console loaded and wired; JS errors fail the test."""
    pages, errors = [], []

    def open_(url: str):
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("body[data-ready]")
        pages.append(page)
        return page

    yield open_
    for page in pages:
        page.close()
    assert not errors, errors


@pytest.fixture
def screenshot(request):
    """screenshot(page, name): with --console-screenshots DIR, DIR/console-<name>-<width>.png at
    both widths (a small palette PNG); otherwise nothing."""
    folder = request.config.getoption("--console-screenshots")

    def shoot(page, name: str) -> None:
        if not folder:
            return
        from PIL import Image
        for width, height in (WIDE, NARROW):
            page.set_viewport_size({"width": width, "height": height})
            page.locator("header").scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            png = page.screenshot(full_page=width == WIDE[0])
            image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64)
            image.save(Path(folder) / f"console-{name}-{width}.png", optimize=True)
        page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
    return shoot
