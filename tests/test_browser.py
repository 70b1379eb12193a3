"""The built docs site in a real headless Chromium (Debian's package).

Serves the site from 127.0.0.1, types "loss flat" into the mkdocs-material
search, opens a fitting entry, finds its snippet and copy button, follows a
quote's citation link and checks that the cited line is the one in view.
Screenshots of the home page and an entry page go to artifacts/.

Runs on the fixture KB (always) and on the shipped KB (once it holds an entry
whose symptoms describe a flat loss).
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import time

import pytest

from kb_tools.load import load_kb
from kb_tools.site import build_site

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ARTIFACTS = os.path.join(REPO, "artifacts")
FIXTURE_KB = os.path.join(HERE, "fixtures", "site", "kb")
SHIPPED_KB = os.path.join(REPO, "kb")

BROWSER_MISSING = not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK))
if BROWSER_MISSING and os.environ.get("KB_REQUIRE_BROWSER"):  # CI sets it: there a skip would hide a failure
    raise RuntimeError(f"KB_REQUIRE_BROWSER is set but {CHROMIUM} or {CHROMEDRIVER} is missing")
pytestmark = pytest.mark.skipif(
    BROWSER_MISSING,
    reason="Debian's chromium and chromium-driver are not installed "
           "(apt-get install -y chromium chromium-driver)")


def flat_loss_entries(kb) -> set:
    """Entries whose own symptoms say the loss is flat: what 'loss flat' should find."""
    return {e.id for e in kb.entries.values()
            if any(re.search(r"\bloss\b", s, re.I) and re.search(r"\bflat", s, re.I) for s in e.symptoms)}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,900",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    yield browser
    browser.quit()


@pytest.fixture(scope="module", params=["fixture", "shipped"])
def served(request, tmp_path_factory):
    """(base URL, kb, variant) for a freshly built site served over HTTP on 127.0.0.1."""
    kb = load_kb(FIXTURE_KB if request.param == "fixture" else SHIPPED_KB, use_cache=False)
    assert not kb.problems, "\n".join(map(str, kb.problems))
    if not flat_loss_entries(kb):
        pytest.skip(f"the {request.param} KB has no entry whose symptoms describe a flat loss yet")
    tmp_path = tmp_path_factory.mktemp(f"site-{request.param}")
    site = tmp_path / "site"
    # the shipped site shows the last snippet run (artifacts/snippet-results.json) if there is one
    results = None if request.param == "shipped" else str(tmp_path / "none.json")
    build_site(kb, out_dir=str(site), work_dir=str(tmp_path / "src"), results_path=results)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", kb, request.param
    finally:
        server.shutdown()
        server.server_close()


def _wait(driver, condition, timeout=30, message=""):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition, message)


def _no_injected_script(driver):
    assert driver.execute_script("return window.__kbInjected === undefined"), \
        f"text from the YAML ran as script on {driver.current_url}"


def test_search_entry_snippet_and_citation(driver, served):
    from selenium.webdriver.common.by import By

    base, kb, variant = served
    fitting = flat_loss_entries(kb)
    os.makedirs(ARTIFACTS, exist_ok=True)

    driver.get(base)
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "input[data-md-component=search-query]"))
    driver.save_screenshot(os.path.join(ARTIFACTS, f"site-{variant}-home.png"))
    _no_injected_script(driver)

    # search the way a user does: click into the box and type
    box = driver.find_element(By.CSS_SELECTOR, "input[data-md-component=search-query]")
    box.click()
    box.send_keys("loss flat")

    def fitting_result(d):
        for link in d.find_elements(By.CSS_SELECTOR, ".md-search-result__item a"):
            m = re.search(r"/entries/([a-z0-9-]+)/", link.get_attribute("href") or "")
            if m and m.group(1) in fitting:
                return link
        return False

    link = _wait(driver, fitting_result, message=f"no search result among {sorted(fitting)} for 'loss flat'")
    entry_id = re.search(r"/entries/([a-z0-9-]+)/", link.get_attribute("href")).group(1)
    link.click()
    _wait(driver, lambda d: f"/entries/{entry_id}/" in d.current_url, message="the result did not open the entry")

    # the entry page: its snippet, in a code block with material's copy button
    code = _wait(driver, lambda d: d.execute_script("""
        const h = document.getElementById('snippet');
        for (let el = h && h.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
            const block = el.matches('.highlight') ? el : el.querySelector('.highlight');
            if (block && block.querySelector('button[data-clipboard-target]')) return block.querySelector('code').innerText;
        }
        return false;"""), message=f"no snippet with a copy button on {entry_id}")
    assert code.strip() == kb.entries[entry_id].snippet.strip()
    driver.execute_script("document.getElementById('snippet').scrollIntoView()")
    _wait(driver, lambda d: d.execute_script(  # the header has swapped in the page title
        "return document.querySelector('.md-header__title--active') !== null"))
    time.sleep(0.6)  # let the header's cross-fade finish before the screenshot
    driver.save_screenshot(os.path.join(ARTIFACTS, f"site-{variant}-entry.png"))
    _no_injected_script(driver)

    # a quote's citation opens the cached source with the cited line in view
    cited = [(e.id, q) for e in [kb.entries[entry_id]] + list(kb.entries.values())
             for q in (kb.quotes[i] for i in e.quote_ids) if q.lines]
    assert cited, "no entry cites a line of a cached source"
    cite_entry, quote = cited[0]
    if cite_entry != entry_id:
        driver.get(f"{base}entries/{cite_entry}/")
    anchor = _wait(driver, lambda d: next(
        (a for a in d.find_elements(By.CSS_SELECTOR, f"[data-quote='{quote.id}'] a.kb-cite")), False))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", anchor)
    anchor.click()
    first = quote.lines[0]
    _wait(driver, lambda d: d.current_url.endswith(f"/sources/{quote.source}/#L{first}"),
          message="the citation link did not open the source at the cited line")
    view = _wait(driver, lambda d: d.execute_script("""
        const el = document.getElementById(arguments[0]);
        if (!el) return false;
        const r = el.getBoundingClientRect();
        const header = document.querySelector('.md-header').getBoundingClientRect().bottom;
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        if (!(r.top >= header && r.bottom <= window.innerHeight && hit && el.contains(hit))) return false;
        return el.querySelector('.kb-text').textContent;""", f"L{first}"),
        message=f"line {first} of {quote.source} is not in view after following the citation")
    source = kb.sources[quote.source]
    with open(os.path.join(os.path.dirname(kb.root), source.path), encoding="utf-8") as fh:
        expected = fh.read().splitlines()[first - 1]
    assert view == expected
    _no_injected_script(driver)


def test_alias_redirect_lands_on_entry(driver, served):
    base, kb, _ = served
    entry = next((e for e in kb.entries.values() if e.aliases), None)
    if entry is None:
        pytest.skip("no entry has an alias")
    driver.get(f"{base}{entry.aliases[0]}/")
    _wait(driver, lambda d: d.current_url.endswith(f"/entries/{entry.id}/"),
          message=f"/{entry.aliases[0]}/ did not redirect to /entries/{entry.id}/")
