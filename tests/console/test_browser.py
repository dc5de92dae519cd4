"""The console in headless Chromium against a real stack on a tiny random model: each test
drives the page as a person would (labels, buttons, the keyboard) and checks what it shows
against the stack itself, read over its own HTTP APIs."""
from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn
import yaml
from fpdf import FPDF

from console.app import create_app
from console.config import ConsoleConfig
from tests.agents.fake_model import ScriptedModel, call, text
from tests.stack_fixtures import free_port
from tests.training.conftest import PAIRS

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'").expect


def poll(page, condition, what: str, tries: int = 300) -> None:
    """Wait for `condition()` (the page's CSP forbids wait_for_function's eval)."""
    for _ in range(tries):
        if condition():
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"gave up waiting for {what}")


def above_axis(line) -> bool:
    """Whether an SVG polyline of console/static/js/plot.js has a point above its x axis."""
    return any(float(point.split(",")[1]) < 158 for point in (line.get_attribute("points") or "").split())


def console_url(settings) -> str:
    return settings.console_url + "/"


def test_chat_runs_a_tool_call_and_shows_its_result(stack, open_console, screenshot):
    _, settings, _ = stack
    served = httpx.get(settings.runtime_url + "/v1/models").json()["data"][0]
    page = open_console(console_url(settings))
    # offer only the runtime toolset, and make the first request call runtime_status (the
    # server constrains decoding to a valid call, so even a random model makes it)
    for box in page.get_by_role("group", name="Toolsets offered").get_by_role("checkbox").all():
        box.set_checked(box.get_attribute("value") == "runtime")
    page.get_by_label("Tool choice", exact=True).select_option("runtime_status")
    page.get_by_label("Max tokens", exact=True).fill("64")
    page.get_by_label("Message", exact=True).fill("Which model serves you?")
    page.get_by_label("Message", exact=True).press("Enter")

    result = page.locator("#chat-log details.call").first
    result.locator(".badge.ok").wait_for()
    assert result.locator(".tool-name").inner_text() == "runtime_status"
    result.locator("summary").click()                    # collapsed until opened
    # the log may render again as the turn ends: read the result once it shows, not mid-render
    result.locator("pre.result").wait_for(state="visible")
    shown = json.loads(result.locator("pre.result").inner_text())
    assert shown["ok"] and shown["data"]["runtime"]["model"] == served["id"]
    assert shown["data"]["runtime"]["revision"] == served["revision"]
    page.locator("#chat-log .msg.assistant .awareness").first.wait_for()
    assert "mean log-prob" in page.locator("#chat-log .awareness").first.inner_text()
    page.locator("#chat-send:not([disabled])").wait_for()

    page.reload()                                         # the conversation survives a reload
    page.wait_for_selector("body[data-ready]")
    assert page.locator("#chat-log .msg.user").first.inner_text().endswith("Which model serves you?")
    assert page.locator("#chat-log details.call .tool-name").first.inner_text() == "runtime_status"

    page.get_by_label("Agent loop", exact=True).check()               # the same conversation through the agent loop
    page.get_by_label("Tool choice", exact=True).select_option("auto")
    page.get_by_label("Message", exact=True).fill("Say hello.")
    page.get_by_role("button", name="Send").click()
    agent = page.locator("#chat-log .msg.assistant").nth(1)
    agent.locator(".meta", has_text="agent loop").wait_for()
    page.locator("#chat-send:not([disabled])").wait_for()
    assert not agent.locator(".error-text").count(), agent.inner_text()
    screenshot(page, "chat")


def make_pdf(path) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Maintenance manual. This page describes the pump housing and its bolts.")
    pdf.add_page()
    pdf.multi_cell(0, 8, "The zephyrine relief valve opens at 47 kilopascals and closes at 39 kilopascals.")
    pdf.output(str(path))


def test_a_pdf_upload_leads_to_a_cited_hit(stack, open_console, tmp_path, screenshot):
    _, settings, _ = stack
    pdf = tmp_path / "manual.pdf"
    make_pdf(pdf)
    page = open_console(console_url(settings) + "#documents")
    page.get_by_label("Collection", exact=True).fill("manuals")
    page.get_by_label("PDF or text files", exact=True).set_input_files(str(pdf))
    page.get_by_role("button", name="Upload and index").click()
    page.locator("#doc-status.ok-text").wait_for()
    assert "manual.pdf: added, 2 page(s)" in page.locator("#doc-status").inner_text()
    listed = httpx.get(settings.worker_url + "/v1/rag/documents", params={"collection": "manuals"}).json()
    assert [d["source"] for d in listed["documents"]] == ["manual.pdf"]
    page.locator("#doc-table tbody tr", has_text="manual.pdf").wait_for()

    page.get_by_label("Query", exact=True).fill("zephyrine relief valve pressure")
    page.get_by_role("button", name="Search").click()
    first = page.locator("#doc-hits li.hit").first
    first.wait_for()
    assert re.fullmatch(r"\[1\] manual\.pdf, page 2 · score .*", first.locator(".cite").inner_text())
    assert "opens at 47 kilopascals" in first.locator("blockquote").inner_text()
    screenshot(page, "documents")

    page.get_by_role("button", name="Delete manual.pdf").click()
    page.locator("#doc-table tbody", has_text="no documents").wait_for()
    assert httpx.get(settings.worker_url + "/v1/rag/documents", params={"collection": "manuals"}).json()["documents"] == []


def test_sql_browse_query_read_only_and_memory_notes(stack, open_console, screenshot):
    _, settings, _ = stack
    sql = lambda path, statement: httpx.post(f"{settings.worker_url}/v1/sql/{path}",  # noqa: E731
                                             json={"db": "astro", "sql": statement})
    assert sql("exec", "CREATE TABLE planets (name TEXT, moons INTEGER)").status_code == 200
    assert sql("exec", "INSERT INTO planets VALUES ('Mercury', 0), ('Earth', 1), ('Mars', 2)").status_code == 200
    page = open_console(console_url(settings) + "#data")
    page.get_by_label("Database", exact=True).select_option("astro")
    page.get_by_role("button", name="planets").click()
    page.locator("#sql-result td", has_text="Mars").wait_for()
    assert page.locator("#sql-result tbody tr").count() == 3

    page.get_by_label("SQL", exact=True).fill("SELECT name FROM planets WHERE moons >= 1 ORDER BY name")
    page.get_by_role("button", name="Run").click()
    page.locator("#sql-status", has_text="2 row(s)").wait_for()
    expected = sql("query", "SELECT name FROM planets WHERE moons >= 1 ORDER BY name").json()["rows"]
    assert [[c] for c in page.locator("#sql-result tbody td").all_inner_texts()] == expected

    page.get_by_label("SQL", exact=True).fill("DELETE FROM planets")     # read-only unless switched
    page.get_by_role("button", name="Run").click()
    page.locator("#sql-status.error-text").wait_for()
    assert len(sql("query", "SELECT * FROM planets").json()["rows"]) == 3
    page.get_by_label("Allow writes", exact=True).check()
    page.get_by_label("SQL", exact=True).fill("INSERT INTO planets VALUES ('Jupiter', 95)")
    page.get_by_role("button", name="Run").click()
    page.locator("#sql-status", has_text="1 changed").wait_for()
    assert sql("query", "SELECT moons FROM planets WHERE name = 'Jupiter'").json()["rows"] == [[95]]

    page.get_by_label("Note", exact=True).fill("The astro database lists the planets and their moons.")
    page.get_by_label("Tags", exact=True).fill("astro, sql")
    page.get_by_role("button", name="Save note").click()
    page.locator("#memory-notes li", has_text="lists the planets").wait_for()
    stored = httpx.post(settings.worker_url + "/v1/sql/query", json={"db": "memory", "sql": "SELECT text, tags FROM notes"})
    assert stored.json()["rows"] == [["The astro database lists the planets and their moons.", "astro,sql"]]
    page.get_by_role("button", name="planets").click()
    page.locator("#sql-result td", has_text="Jupiter").wait_for()
    screenshot(page, "data")


def test_a_fine_tune_started_and_followed(stack, open_console, screenshot):
    _, settings, docs = stack
    page = open_console(console_url(settings) + "#jobs")
    page.get_by_label("Preference pairs").fill("\n".join(json.dumps(p) for p in PAIRS))
    page.get_by_role("button", name="Load pairs").click()
    page.get_by_label("Use pair 4", exact=True).uncheck()              # only the chosen pairs train
    page.get_by_label("Base model", exact=True).fill(str(docs / "tiny.gguf"))
    page.get_by_label("Steps", exact=True).fill("2")
    page.get_by_label("Learning rate", exact=True).fill("0.002")
    page.get_by_role("button", name="Start fine-tune").click()
    page.locator("#job-status.ok-text").wait_for()
    job_id = page.locator("#job-status").inner_text().split(":")[0]

    page.locator("#job-progress-text", has_text="succeeded").wait_for(timeout=240_000)
    job = httpx.get(f"{settings.worker_url}/v1/jobs/{job_id}").json()
    assert job["state"] == "succeeded" and job["dataset"]["examples"] == 3
    loss = job["progress"]["loss"]
    assert f"step 2/2, loss {loss:.4f}" in page.locator("#job-progress-text").inner_text()
    assert page.locator("#job-progress").get_attribute("value") == "2"
    points = page.locator("#job-loss polyline").get_attribute("points").split()
    assert len(points) == 2                                  # one point a step
    row = page.locator(f'#job-table tr[data-job="{job_id}"]')
    row.locator(".badge.succeeded").wait_for()

    before = httpx.get(settings.runtime_url + "/admin/revisions").json()["active"]
    row.get_by_role("button", name="Promote").click()        # the trained revision serves
    revision = job["result"]["revision"]
    page.locator("#rev-serving", has_text=f"revision {revision} serves now").wait_for(timeout=120_000)
    assert httpx.get(settings.runtime_url + "/v1/models").json()["data"][0]["revision"] == revision
    screenshot(page, "jobs")
    page.get_by_role("button", name="Roll back to the last known good").click()
    page.locator("#rev-serving", has_text=f"revision {before} serves now").wait_for(timeout=120_000)
    assert httpx.get(settings.runtime_url + "/v1/models").json()["data"][0]["revision"] == before

    page.on("dialog", lambda dialog: dialog.accept())       # the chat's revision picker asks first
    page.get_by_role("tab", name="Chat").click()
    picker = page.get_by_label("Revision", exact=True)
    picker.locator("option", has_text=f"{before} (serving)").wait_for(state="attached")
    picker.select_option(revision)
    picker.locator("option", has_text=f"{revision} (serving)").wait_for(state="attached", timeout=120_000)
    assert httpx.get(settings.runtime_url + "/v1/models").json()["data"][0]["revision"] == revision


def test_metrics_plot_the_runtimes_counters(stack, open_console, screenshot):
    _, settings, _ = stack
    page = open_console(console_url(settings) + "#metrics")
    page.locator("#plot-tps polyline").wait_for(state="attached")    # two samples: a rate
    r = httpx.post(settings.runtime_url + "/v1/completions",
                   json={"model": Path(settings.model).stem, "prompt": "hello", "max_tokens": 24, "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    # a sample that saw the tokens plots a point above the x axis (y = 158 in the 480x180 view)
    poll(page, lambda: above_axis(page.locator("#plot-tps polyline")), "a tokens/s above 0")
    poll(page, lambda: above_axis(page.locator("#plot-rps polyline")), "a request rate above 0")
    assert re.fullmatch(r"\d+\.\d %", page.locator("#m-kv").inner_text())
    screenshot(page, "metrics")


SUITE = {
    "name": "console-check",
    "reset": {"sql": [{"db": "console_{run}", "sql": "DROP TABLE IF EXISTS colours"}]},
    "turns": [
        {"name": "store", "user": "Store the colour blue in a table colours.", "tools": ["sql"],
         "expect": {"called": ["sql_exec"],
                    "sql": [{"db": "console_{run}", "query": "SELECT name FROM colours", "contains": ["blue"]}]}},
        {"name": "recall", "user": "Which colour did you store?", "tools": ["sql"],
         "expect": {"answer_contains": ["green"]}},
    ],
}


@pytest.fixture
def scripted_console(stack, tmp_path):
    """scripted_console(**config) -> (console URL, ScriptedModel): a second console whose runtime
    is a scripted model (a random model passes no suite) and whose worker is the stack's real one."""
    _, settings, _ = stack
    servers = []

    def start(**config):
        script = iter([call("sql_exec", db="console_s0", sql="CREATE TABLE colours (name TEXT)"),
                       call("sql_exec", db="console_s0", sql="INSERT INTO colours VALUES ('blue')"),
                       text("I stored blue in the colours table.")])
        fake = ScriptedModel(lambda body: next(script, text("It was blue."))).__enter__()
        port = free_port()
        console = ConsoleConfig(runtime_url=fake.url, worker_url=settings.worker_url, home=tmp_path, port=port, **config)
        server = uvicorn.Server(uvicorn.Config(create_app(console), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            thread.join(0.05)
        servers.append((server, thread, fake))
        return f"http://127.0.0.1:{port}/", fake

    yield start
    for server, thread, fake in servers:
        server.should_exit = True
        thread.join(10)
        fake.__exit__(None, None, None)


def test_a_suite_turn_shown_passing_and_one_failing(scripted_console, open_console, screenshot):
    url, fake = scripted_console()
    page = open_console(url + "#suites")
    page.locator("#suite-name option").first.wait_for(state="attached")
    page.get_by_text("Or paste a suite file").click()
    page.get_by_label("Suite YAML", exact=True).fill(yaml.safe_dump(SUITE))
    page.get_by_role("button", name="Run suite").click()
    page.locator("#suite-status", has_text="1 of 2 turn(s) passed").wait_for()

    store = page.locator('#suite-turns li[data-turn="store"]')
    assert store.locator(".turn-head .badge").inner_text().lower() == "passed"
    assert store.locator(".checks li.ok-text").count() == 2 and not store.locator(".checks li.error-text").count()
    store.get_by_text("Transcript").click()
    assert store.locator("details.call .tool-name").all_inner_texts() == ["sql_exec", "sql_exec"]
    assert "I stored blue in the colours table." in store.locator(".answer").inner_text()
    recall = page.locator('#suite-turns li[data-turn="recall"]')
    assert recall.locator(".turn-head .badge").inner_text().lower() == "failed"
    assert "green" in recall.locator(".checks li.error-text").inner_text()
    assert {t["function"]["name"] for t in fake.requests[0]["tools"]} >= {"sql_exec", "sql_query"}
    screenshot(page, "suites")


# a control in Playwright's ARIA snapshot is `- role "name" ...` when named, `- role`, `- role: value` when not
UNNAMED_CONTROL = re.compile(r'^\s*- (textbox|combobox|checkbox|spinbutton|searchbox|button|slider|radio)(?! ")')


def test_keyboard_moves_between_tabs_and_every_control_has_a_name(stack, open_console):
    _, settings, _ = stack
    page = open_console(console_url(settings) + "#chat")
    page.get_by_role("tab", name="Chat").focus()
    names = ["Chat", "Documents", "Data", "Jobs", "Suites", "Metrics"]
    for i, name in enumerate(names):
        tab = page.get_by_role("tab", name=name)
        expect(tab).to_be_focused()
        assert tab.get_attribute("aria-selected") == "true"
        panel = page.get_by_role("tabpanel", name=name)
        assert panel.is_visible()
        # the accessibility tree as a screen reader gets it: no control without a name
        unnamed = [line for line in panel.aria_snapshot().splitlines() if UNNAMED_CONTROL.match(line)]
        assert not unnamed, (name, unnamed)
        if i + 1 < len(names):
            page.keyboard.press("ArrowRight")
    assert page.url.endswith("#metrics")
    page.keyboard.press("Home")
    assert page.get_by_role("tab", name="Chat").get_attribute("aria-selected") == "true"
    page.keyboard.press("Tab")                                 # from the tab strip into the open panel
    expect(page.get_by_role("tabpanel", name="Chat")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Model", exact=True)).to_be_focused()


def test_with_an_api_key_the_page_asks_once_and_keeps_it_for_the_tab(scripted_console, context):
    url, _ = scripted_console(api_key="k3y-for-tests")
    page = context.new_page()
    page.goto(url)
    dialog = page.get_by_role("dialog", name="API key")
    dialog.wait_for()                                       # every request at start was refused: one dialog
    dialog.get_by_label("Key", exact=True).fill("k3y-for-tests")
    dialog.get_by_role("button", name="Use key").click()
    page.wait_for_selector("body[data-ready]")
    assert page.locator("#served").inner_text().startswith("fake-model · revision rev-test")
    assert not [c for c in context.cookies() if c["domain"] == "127.0.0.1"]     # never a cookie
    page.reload()                                           # kept for this tab: no second dialog
    page.wait_for_selector("body[data-ready]")
    assert not dialog.is_visible()
    page.close()
