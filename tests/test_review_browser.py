"""The review page in a real browser (Debian's chromium driven by Selenium), used as an
analyst uses it: keys, a typed summary, a reload, a second tab.

The 1977 letter is enriched once per module by ``letterchunk run`` replaying its cassette (the
answers go into a cache), reviewed on the page, then run again from the cache alone: the
chunk file must carry the corrections, pass ``validate`` and show them in ``report.html``.

Without chromium (or chromedriver) the tests are skipped locally, and FAIL when ``CI`` is set
(``apt-get install -y chromium chromium-driver``); ``LETTERCHUNK_CHROMIUM`` and
``LETTERCHUNK_CHROMEDRIVER`` name other binaries.  ``LETTERCHUNK_REVIEW_SCREENSHOT=FILE``
saves the page's screenshot there (docs/review-page.png is made so).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from letterchunk.cli import main
from letterchunk.contract.validate import validate_path
from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.replay import REPLAY_ENV, recorder
from letterchunk.report.html import build_html
from letterchunk.review.records import REVIEWS_FILE, read_reviews
from letterchunk.review.server import ReviewServer

# one worker runs the whole module: its replay and its browser are made once, shared by all
pytestmark = [
    pytest.mark.browser,
    pytest.mark.replay,
    pytest.mark.slow,
    pytest.mark.xdist_group("review_browser"),
]

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
CASSETTE = ROOT / "cassettes" / "1977.yaml"
EVIL = "</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
NEW_SUMMARY = "Berkshire's 1977 insurance investments grew, and the analyst checked this summary."
# harness switches, read before the autouse fixture clears LETTERCHUNK_* from each test's env
SCREENSHOT = os.environ.get("LETTERCHUNK_REVIEW_SCREENSHOT")
CHROMEDRIVER = os.environ.get("LETTERCHUNK_CHROMEDRIVER")
FLAGS = (
    "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
    "--disable-background-networking --disable-component-update --disable-sync "
    "--window-size=1300,900"
).split()


def _binary(given: str | None, env: str, names: tuple[str, ...], package: str) -> str:
    for name in (given, *names):
        found = shutil.which(name) if name else None
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail(f"headless chromium is required in CI: apt-get install -y {package} ({env})")
    pytest.skip(f"{package} not installed (apt-get install -y {package}); CI fails instead")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = _binary(
        os.environ.get("LETTERCHUNK_CHROMIUM"),
        "LETTERCHUNK_CHROMIUM",
        ("chromium", "chromium-browser"),
        "chromium",
    )
    driver_path = _binary(
        CHROMEDRIVER, "LETTERCHUNK_CHROMEDRIVER", ("chromedriver",), "chromium-driver"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('profile')}")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _run(out: Path, cache: Path, *extra: str) -> int:
    argv = ["run", str(LETTER), "--out", str(out), "--cache-dir", str(cache), "-q", *extra]
    return main(argv)


@pytest.fixture(scope="module")
def enriched(tmp_path_factory):
    """(out, cache): 1977 enriched by replaying its cassette once, the answers cached."""
    base = tmp_path_factory.mktemp("enriched")
    out, cache = base / "out", base / "cache"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {**REPLAY_ENV, "LETTERCHUNK_MODEL": MODEL_ID}.items():
            mp.setenv(key, value)
        with recorder("none").use_cassette(str(CASSETTE), allow_playback_repeats=False):
            assert _run(out, cache) == 0
    return out, cache


def copy_of(enriched, tmp_path) -> tuple[Path, Path]:
    out, cache = tmp_path / "out", tmp_path / "cache"
    shutil.copytree(enriched[0], out)
    shutil.copytree(enriched[1], cache)
    return out, cache


def wait(driver, check, timeout=30):
    return WebDriverWait(driver, timeout).until(lambda d: check(d))


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")


def reviewed(driver) -> int:
    return int(driver.find_element(By.ID, "counter").get_attribute("data-reviewed"))


def current(driver) -> int:
    return int(driver.find_element(By.ID, "current").get_attribute("data-item"))


def press(driver, key: str) -> None:
    driver.find_element(By.TAG_NAME, "body").send_keys(key)


def text_of(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def decide(driver, key: str) -> int:
    """Press ``key`` on the current item; wait until it is stored; the item's number."""
    item, before = current(driver), reviewed(driver)
    press(driver, key)
    wait(driver, lambda d: reviewed(d) == before + 1 and current(d) != item)
    return item


def status_row(driver, item: int) -> str:
    rows = driver.find_elements(By.CSS_SELECTOR, f'#list .row[data-item="{item}"]')
    return rows[0].text if rows else ""


def test_review_loop_from_keys_to_the_rerun(browser, enriched, tmp_path):
    out, cache = copy_of(enriched, tmp_path)
    with ReviewServer(out, reviewer="ana") as server:
        open_page(browser, server.url)
        assert text_of(browser, "counter").endswith(" / " + str(len(server.queue.items)))
        assert browser.find_element(By.ID, "keys").text.count("accept") == 1
        # the first item is the most uncertain: its quote is highlighted in the chunk's text
        first = server.queue.items[0]
        quote = browser.find_element(By.ID, "c-quote").text
        assert quote.split() == (first.quote or "").split()
        assert f"threshold {first.threshold}" in text_of(browser, "c-p")

        rejected = decide(browser, "n")
        accepted = decide(browser, "y")
        assert (rejected, accepted) == (0, 1)

        # a summary the validator refuses is not stored, and the page says why
        box = browser.find_element(By.ID, "e-summary")
        box.clear()
        box.send_keys("One. Two. Three. Four. Five.")
        browser.find_element(By.ID, "b-summary").click()
        wait(browser, lambda d: "not saved" in text_of(d, "msg"))
        assert "summary.sentences" in text_of(browser, "msg")
        assert len(read_reviews(out)) == 2

        edited = server.queue.chunks[server.queue.items[current(browser)].chunk]
        box.clear()
        box.send_keys(NEW_SUMMARY)
        browser.find_element(By.ID, "b-summary").click()
        wait(browser, lambda d: text_of(d, "msg") == "saved summary")
        browser.execute_script("window.scrollTo(0, 0)")
        shot = tmp_path / "review-page.png"
        browser.save_screenshot(str(shot))
        if SCREENSHOT:
            shutil.copyfile(shot, SCREENSHOT)

        browser.refresh()
        open_page(browser, server.url)
        assert reviewed(browser) == 2
        assert status_row(browser, rejected).startswith("[rejected]")
        assert status_row(browser, accepted).startswith("[accepted]")
        assert "rejected by ana" in text_of(browser, "c-decision")
        press(browser, "j")
        press(browser, "j")
        wait(browser, lambda d: d.find_element(By.ID, "e-summary").get_attribute("value"))
        assert browser.find_element(By.ID, "e-summary").get_attribute("value") == NEW_SUMMARY

    lines = (out / REVIEWS_FILE).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["decision"] for line in lines] == ["reject", "accept", "edit"]

    # the rerun answers every chunk from the cache and applies the three decisions
    assert _run(out, cache, "--cache", "offline") == 0
    chunks = {
        c["chunk_id"]: c
        for c in map(json.loads, (out / "1977.jsonl").read_text(encoding="utf-8").splitlines())
    }
    assert chunks[edited.chunk_id]["metadata"]["contextual_summary"] == NEW_SUMMARY
    evidence = {
        e["chunk_id"]: e
        for e in map(json.loads, (out / "1977.evidence.jsonl").read_text("utf-8").splitlines())
    }
    no_rule = first.target
    assert no_rule not in evidence[server.queue.chunks[first.chunk].chunk_id].get(
        "principle_evidence", []
    )
    assert [
        v for v in validate_path(out / "1977.jsonl", stage="enriched") if v.severity == "error"
    ] == []

    page = build_html(out)
    browser.get(page.resolve().as_uri())
    wait(
        browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes"
    )
    assert NEW_SUMMARY in browser.find_element(By.TAG_NAME, "body").text


def test_two_tabs_keep_both_decisions_and_undo_takes_one_back(browser, enriched, tmp_path):
    out, _ = copy_of(enriched, tmp_path)
    with ReviewServer(out, reviewer="ana") as server:
        open_page(browser, server.url)
        first_tab = browser.current_window_handle
        browser.switch_to.new_window("tab")
        open_page(browser, server.url)
        press(browser, "j")
        wait(browser, lambda d: current(d) == 1)
        decide(browser, "y")
        browser.switch_to.window(first_tab)
        decide(browser, "n")
        press(browser, "u")  # undo: the item is open again and current
        wait(browser, lambda d: reviewed(d) == 0 and current(d) == 0)
        assert "undone" in text_of(browser, "msg")
        decide(browser, "n")
        browser.refresh()
        open_page(browser, server.url)
        assert reviewed(browser) == 2
        assert status_row(browser, 0).startswith("[rejected]")
        assert status_row(browser, 1).startswith("[accepted]")
        for handle in browser.window_handles:
            if handle != first_tab:
                browser.switch_to.window(handle)
                browser.close()
        browser.switch_to.window(first_tab)
    records = read_reviews(out)
    assert [r.decision for r in records] == ["accept", "reject", "undo", "reject"]
    assert records[2].undoes == records[1].id


def test_letter_text_and_reviewer_names_are_shown_as_text(browser, enriched, tmp_path):
    out, _ = copy_of(enriched, tmp_path)
    path = out / "1977.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["content"] = EVIL + row["content"]
        row["metadata"]["contextual_summary"] = EVIL
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with ReviewServer(out, reviewer="ana") as server:
        open_page(browser, server.url)
        title = browser.title
        reviewer = browser.find_element(By.ID, "reviewer")
        reviewer.clear()
        reviewer.send_keys(EVIL)
        browser.find_element(By.TAG_NAME, "body").click()
        decide(browser, "y")
        browser.refresh()
        open_page(browser, server.url)
        assert EVIL in text_of(browser, "c-text")
        assert EVIL in text_of(browser, "c-decision")
        assert browser.find_element(By.ID, "e-summary").get_attribute("value") == EVIL
        assert browser.find_elements(By.CSS_SELECTOR, "#current img, #current b") == []
        assert browser.title == title and "pwned" not in browser.title
    assert read_reviews(out)[0].reviewer == EVIL


def test_the_page_refuses_to_load_without_the_token(browser, enriched, tmp_path):
    out, _ = copy_of(enriched, tmp_path)
    with ReviewServer(out) as server:
        browser.get(server.url.split("?")[0])
        assert "token" in browser.find_element(By.TAG_NAME, "body").text
    assert not (out / REVIEWS_FILE).exists()


def test_filters_narrow_the_list_and_the_counter_counts_all(browser, enriched, tmp_path):
    out, _ = copy_of(enriched, tmp_path)
    with ReviewServer(out, reviewer="ana") as server:
        open_page(browser, server.url)
        kinds = {item.kind for item in server.queue.items}
        assert {"rule", "confession", "concepts"} <= kinds
        Select(browser.find_element(By.ID, "f-kind")).select_by_value("confession")
        wanted = sum(1 for item in server.queue.items if item.kind == "confession")
        wait(browser, lambda d: text_of(d, "shown") == f"{wanted} shown")
        rows = browser.find_elements(By.CSS_SELECTOR, "#list .row")
        assert rows and all("] confession " in row.text for row in rows)
        assert "confession" in text_of(browser, "c-head")
        press(browser, "y")
        wait(browser, lambda d: reviewed(d) == 1)
        Select(browser.find_element(By.ID, "f-kind")).select_by_value("")
        Select(browser.find_element(By.ID, "f-status")).select_by_value("accepted")
        wait(browser, lambda d: text_of(d, "shown") == "1 shown")
        assert text_of(browser, "counter").startswith("1 reviewed / ")
        # the list draws only the rows in view, not one node per decision
        Select(browser.find_element(By.ID, "f-status")).select_by_value("")
        wait(browser, lambda d: text_of(d, "shown") == f"{len(server.queue.items)} shown")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#list .row")) < 60
