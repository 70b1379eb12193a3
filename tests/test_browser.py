"""The built docs site in a real headless Chromium (Debian's package).

Serves the site from 127.0.0.1, types "loss flat" into the site's search box,
opens a fitting entry, finds its snippet and copy button, follows a quote's
citation link and checks that the cited line is the one in view. Screenshots
of the home page and an entry page go to artifacts/.

Then the search box against `kb search`: every labelled query of QUERY_FILES
typed into the box, its shown top 3 compared with `search.rank`; keyboard use;
and words-only ranking when the token table cannot be fetched.

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

from kb_tools import search
from kb_tools.load import load_kb
from kb_tools.site import build_site

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ARTIFACTS = os.path.join(REPO, "artifacts")
FIXTURE_KB = os.path.join(HERE, "fixtures", "site", "kb")
SHIPPED_KB = os.path.join(REPO, "kb")
# Labelled query files (`queries: [{query, expect}]`) run through the site's search box; a
# real-report set is added by listing it here.
QUERY_FILES = [p for p in (os.path.join(HERE, "queries.yaml"), os.path.join(HERE, "queries_holdout.yaml"),
                           os.path.join(HERE, "real_reports", "dev.yaml")) if os.path.exists(p)]
HIT_RATE_MARGIN = 0.03   # the site's top-3 hit rate may differ from the CLI's by at most this
TYPED_TAIL = 4           # a longer query is pasted up to its last TYPED_TAIL characters, then typed
BOX, RESULTS = "#kb-search-input", "#kb-search-results"

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
    """Poll `condition`; the results list is re-rendered as typing pauses, so a stale element means retry."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition, message)


def _no_injected_script(driver):
    assert driver.execute_script("return window.__kbInjected === undefined"), \
        f"text from the YAML ran as script on {driver.current_url}"


def test_search_entry_snippet_and_citation(driver, served):
    from selenium.webdriver.common.by import By

    base, kb, variant = served
    fitting = flat_loss_entries(kb)
    os.makedirs(ARTIFACTS, exist_ok=True)

    driver.get(base)
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    driver.save_screenshot(os.path.join(ARTIFACTS, f"site-{variant}-home.png"))
    _no_injected_script(driver)

    # search the way a user does: click into the box and type
    box = driver.find_element(By.CSS_SELECTOR, BOX)
    box.click()
    box.send_keys("loss flat")

    def fitting_result(d):
        for link in d.find_elements(By.CSS_SELECTOR, f"{RESULTS} li a"):
            m = re.search(r"/entries/([a-z0-9-]+)/", link.get_attribute("href") or "")
            if m and m.group(1) in fitting:
                return link
        return False

    def click_fitting_result(d):
        link = fitting_result(d)
        if not link:
            return False
        found = re.search(r"/entries/([a-z0-9-]+)/", link.get_attribute("href")).group(1)
        link.click()  # a list re-rendered in between makes this stale: _wait finds the link again
        return found

    entry_id = _wait(driver, click_fitting_result, message=f"no search result among {sorted(fitting)} for 'loss flat'")
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


# ---------------------------------------------------------------- the search box against `kb search`

@functools.lru_cache(maxsize=2)
def _index(kb):
    """`kb search`'s index of a served KB, built once per KB."""
    return search.build_index(kb)


def _shown(driver, query: str, ranking: str = "hybrid"):
    """The hits the box shows once it has ranked `query` the given way: [(id, matched, low, href)]."""
    driver.set_script_timeout(30)
    shown = driver.execute_async_script("""
        const [selector, query, ranking, done] = arguments, until = Date.now() + 25000;
        (function poll() {  // in the page, every 10 ms: one round trip per query
            const list = document.querySelector(selector);
            if (list && list.dataset.query === query && list.dataset.ranking === ranking) {
                return done(Array.from(list.querySelectorAll('li[role=option]'), (li) => [li.dataset.id,
                    li.querySelector('.kb-search__matched').textContent,
                    li.classList.contains('kb-search__hit--low'), li.querySelector('a').href]));
            }
            if (Date.now() > until) return done(null);
            setTimeout(poll, 10);
        })();""", RESULTS, query, ranking)
    assert shown is not None, f"the search box never showed {ranking} results for {query!r}"
    return shown


def _type(driver, query: str):
    """Empty the box, paste all but the query's last TYPED_TAIL characters, type the rest."""
    from selenium.webdriver.common.by import By
    box = driver.find_element(By.CSS_SELECTOR, BOX)
    head, tail = query[:-TYPED_TAIL], query[-TYPED_TAIL:]
    driver.execute_script("arguments[0].value = arguments[1];"
                          "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", box, head)
    box.send_keys(tail)


def _open_search(driver, base):
    from selenium.webdriver.common.by import By
    driver.get(base)
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    box.click()
    return box


@pytest.mark.parametrize("query_file", QUERY_FILES, ids=os.path.basename)
def test_site_search_ranks_like_kb_search(driver, served, query_file):
    """Every query typed into the site's box shows the top 3 `kb search` prints, with its
    matched line and low-confidence mark; the site's top-3 hit rate is the CLI's."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("the labelled queries are about the shipped KB")
    index = _index(kb)
    assert index.header["dense"] is not None, "the shipped KB's index has no entry vectors"
    queries = search.load_queries(query_file)
    _open_search(driver, base)
    site_hits = cli_hits = agree = 0
    differ = []
    for q in queries:
        query = " ".join(q["query"].split())  # an input holds one line
        _type(driver, query)
        shown = _shown(driver, query)
        want = search.rank(index, query, 10)
        if [s[0] for s in shown[:3]] == [h.id for h in want[:3]]:
            agree += 1
        else:
            differ.append((query, [h.id for h in want[:3]], [s[0] for s in shown[:3]]))
        if shown and want and shown[0][0] == want[0].id:
            assert shown[0][1] == f"matched: {want[0].matched}" and shown[0][2] == want[0].low_confidence, query
            assert shown[0][3] == f"{base}entries/{want[0].id}/"
        site_hits += any(s[0] in q["expect"] for s in shown[:3])
        cli_hits += any(h.id in q["expect"] for h in want[:3])
    n = len(queries)
    print(f"\n{os.path.basename(query_file)}: {n} queries typed into the site; top 3 as kb search: {agree}; "
          f"top-3 hit rate site {site_hits / n:.3f}, kb search {cli_hits / n:.3f}")
    assert abs(site_hits - cli_hits) / n <= HIT_RATE_MARGIN
    assert differ == [], f"{len(differ)} queries rank differently on the site, e.g. {differ[:3]}"


def test_search_box_by_keyboard(driver, served):
    """'/' and 's' focus the box, arrows move through the hits, Enter opens the selected one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    base, kb, _ = served
    index = _index(kb)
    driver.get(f"{base}entries/")
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    box = driver.find_element(By.CSS_SELECTOR, BOX)
    assert box.get_attribute("id") == "kb-search-input"
    assert driver.find_element(By.CSS_SELECTOR, "label[for=kb-search-input]").get_attribute("textContent").strip()
    for key in ("/", "s"):
        driver.find_element(By.TAG_NAME, "body").send_keys(key)
        assert driver.switch_to.active_element == box, f"{key!r} did not focus the search box"
        assert box.get_attribute("value") == "", f"{key!r} was typed into the box"
        box.send_keys(Keys.ESCAPE)
        driver.execute_script("arguments[0].blur()", box)
    box.click()
    box.send_keys("loss flat")
    shown = _shown(driver, "loss flat")
    want = [h.id for h in search.rank(index, "loss flat", 10)]
    assert [s[0] for s in shown] == want
    assert box.get_attribute("aria-expanded") == "true"
    box.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN)
    selected = driver.find_element(By.CSS_SELECTOR, f"{RESULTS} li[aria-selected=true]")
    assert selected.get_attribute("data-id") == want[1]
    assert box.get_attribute("aria-activedescendant") == selected.get_attribute("id")
    box.send_keys(Keys.ENTER)
    _wait(driver, lambda d: d.current_url == f"{base}entries/{want[1]}/", message="Enter did not open the selected hit")


def test_search_shows_yaml_text_as_text(driver, served):
    """A symptom carrying <script> shows in the hit list as the text it is."""
    base, kb, variant = served
    if variant != "fixture":
        pytest.skip("the fixture KB holds the hostile symptom")
    index = _index(kb)
    symptom = next(s for s in kb.entries["double-softmax"].symptoms if "<script>" in s)
    _open_search(driver, base)
    query = " ".join(symptom.split())
    _type(driver, query)
    shown = _shown(driver, query)
    want = search.rank(index, query, 10)
    assert shown[0][0] == want[0].id == "double-softmax"
    assert shown[0][1] == f"matched: {want[0].matched}" and "<script>" in shown[0][1]
    _no_injected_script(driver)


def test_search_without_the_token_table_ranks_by_words(driver, served):
    """When the token table cannot be fetched the box ranks as `kb search --lexical` and says so."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("run once, on the shipped KB")
    index = _index(kb)
    queries = [q["query"] for q in search.load_queries(QUERY_FILES[0])][:15]
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*static-minilm.int8"]})
    try:
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        _open_search(driver, base)
        differ_from_hybrid = 0
        for query in queries:
            _type(driver, query)
            shown = [s[0] for s in _shown(driver, query, ranking="lexical")]
            assert shown == [h.id for h in search.rank(index, query, 10, dense=False)], query
            differ_from_hybrid += shown[:3] != [h.id for h in search.rank(index, query, 3)]
            _wait(driver, lambda d: "ranked by words only" in d.execute_script(
                "return document.getElementById('kb-search-status').textContent"),
                message="the box does not say that it ranks by words only")
        assert differ_from_hybrid, "words-only and hybrid agree on every query: the check proves nothing"
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})


# ---------------------------------------------------------------- verified runs and loss curves

def _rgb(css: str) -> tuple:
    """(r, g, b) of a computed CSS colour such as 'rgb(198, 40, 40)' or 'rgba(...)'."""
    return tuple(int(float(v)) for v in re.findall(r"[\d.]+", css)[:3])


def _verified_box(driver, url):
    """The page's verified-run admonition: its kind, title, text and computed border colour."""
    from selenium.webdriver.common.by import By
    driver.get(url)
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, ".admonition.kb-verified"))
    assert box.is_displayed()
    kind = next(c for c in box.get_attribute("class").split() if c in ("success", "failure", "warning", "danger"))
    title = box.find_element(By.CSS_SELECTOR, ".admonition-title").text
    return kind, title, box.text, _rgb(box.value_of_css_property("border-left-color"))


def _curve(driver):
    """The entry page's loss-curve SVG, checked to be on screen with a bug and a fix polyline."""
    from selenium.webdriver.common.by import By
    svg = driver.find_element(By.CSS_SELECTOR, "svg.kb-curves")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", svg)
    assert svg.is_displayed() and svg.get_attribute("role") == "img"
    assert svg.size["width"] > 300 and svg.size["height"] > 100, svg.size
    label = driver.execute_script("return arguments[0].querySelector('title').textContent", svg)
    assert "planted bug against fix" in label
    for name in ("bug", "fix"):
        lines = svg.find_elements(By.CSS_SELECTOR, f"polyline.kb-{name}")
        assert lines and any(p.size["width"] > 50 for p in lines), f"no visible {name} curve"
        stroke = _rgb(lines[0].value_of_css_property("stroke"))
        assert stroke != (0, 0, 0), f"the {name} curve has no colour of its own"
    return svg


def test_shipped_entry_pages_show_when_and_where_the_snippet_passed(driver, served):
    """The shipped site reads kb/verified/: a passing entry says so in green with torch,
    device and date, and an entry whose snippet records its losses shows both curves."""
    from kb_tools import snippets, verified
    base, kb, variant = served
    if variant != "shipped":
        kind, title, _, colour = _verified_box(driver, base + f"entries/{sorted(kb.entries)[0]}/")
        assert (kind, title) == ("danger", "Never passed")  # built without any record
        r, g, b = colour
        assert r > 150 and g < 90 and b < 90, colour
        return
    runs = verified.load_results(os.path.join(verified.default_dir(kb.root), verified.RESULTS_FILE))
    with_curves = [eid for eid, e in sorted(kb.entries.items())
                   if (verified.load_curves(verified.default_dir(kb.root), eid) or {}).get("snippet_sha256")
                   == verified.snippet_sha256(snippets.script_text(e))]
    assert with_curves, "no entry of the shipped KB has loss curves from its current snippet"
    eid = with_curves[0]
    kind, title, text, colour = _verified_box(driver, base + f"entries/{eid}/")
    cpu = runs[eid]["cpu"]
    assert kind == "success" and title.startswith("Passed on") and cpu["torch"] in title
    assert f"cpu: passed on {cpu['date'][:10]}" in text and f"Python {cpu['python']}" in text
    r, g, b = colour
    assert g > r and g > b, f"a passing run is not shown in green: {colour}"
    _curve(driver)


@pytest.fixture(scope="module")
def changed_copy(tmp_path_factory):
    """A copy of the fixture KB whose record vouches for every snippet as it was, then one
    snippet edited (double-softmax) and one record dropped (lr-too-low)."""
    import shutil

    from kb_tools import snippets, verified
    tmp = tmp_path_factory.mktemp("verified-copy")
    shutil.copytree(os.path.dirname(FIXTURE_KB), tmp / "copy")
    kb_root = str(tmp / "copy" / "kb")
    kb = load_kb(kb_root, use_cache=False)
    vdir = verified.default_dir(kb_root)
    runs = {(eid, "cpu"): {"outcome": "passed", "date": "2026-11-20T08:15:00Z", "torch": "2.13.0+cpu",
                           "python": "3.11.2", "snippet_sha256": verified.snippet_sha256(snippets.script_text(e))}
            for eid, e in kb.entries.items() if eid != "lr-too-low"}
    verified.record(runs, vdir)
    sha = runs[("overfit-one-batch", "cpu")]["snippet_sha256"]
    verified.write_curves(vdir, "overfit-one-batch", {"bug": [[i, 2.3] for i in range(60)],
                                                      "fix": [[i, 2.3 * 0.9 ** i] for i in range(60)]}, sha, "2.13.0+cpu")
    path = os.path.join(kb_root, "entries", "loss", "double-softmax.yaml")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert text.count("torch.manual_seed(0)") == 1
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.replace("torch.manual_seed(0)", "torch.manual_seed(1)"))
    edited = load_kb(kb_root, use_cache=False)
    assert not edited.problems
    build_site(edited, out_dir=str(tmp / "site"), work_dir=str(tmp / "src"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_changed_and_never_passed_snippets_are_amber_and_red(driver, changed_copy):
    kind, title, text, (r, g, b) = _verified_box(driver, changed_copy + "entries/overfit-one-batch/")
    assert kind == "success" and "cpu: passed on 2026-11-20 08:15 UTC, torch 2.13.0+cpu, Python 3.11.2" in text
    assert g > r and g > b
    _curve(driver)
    kind, title, text, (r, g, b) = _verified_box(driver, changed_copy + "entries/double-softmax/")
    assert (kind, title) == ("warning", "Changed since it last passed") and "earlier version" in text
    assert r > 200 and 80 < g < 200 and b < 80, (r, g, b)  # amber
    kind, title, text, (r, g, b) = _verified_box(driver, changed_copy + "entries/lr-too-low/")
    assert (kind, title) == ("danger", "Never passed")
    assert r > 150 and g < 90 and b < 90, (r, g, b)  # red, not the grey or blue of a note
