"""The built docs site in a real headless Chromium (Debian's package).

Serves the site from 127.0.0.1, types "loss flat" into the site's search box,
opens a fitting entry, finds its snippet and copy button, follows a quote's
citation link and checks that the cited line is the one in view. Screenshots
of the home page and an entry page go to artifacts/.

Then the search box against `kb search`: the labelled queries of QUERY_FILES (every
fourth of the long real-report file) typed into the box, its shown top 3 compared with
`search_rank.rank`; keyboard use;
and words-only ranking when the token table cannot be fetched.

Then accessibility and deployment: the contrast of every visible text in the
light and the dark palette (computed colours, WCAG formula), lists that are
lists, a cited range marked whole and below the header, the 404 page's
did-you-mean, every asset found under the sub-path, snippets that fit at
1280 px and pages without sideways scroll at 390 px.

The site is built with `--site-url` and served under /kb/ (SUB_PATH), missing
files answered with its 404.html, so every test also runs under a sub-path.

Runs on the fixture KB (always) and on the shipped KB (once it holds an entry
whose symptoms describe a flat loss).
"""
from __future__ import annotations

import functools
import http.server
import io
import os
import re
import threading
import time

import pytest

from kb_tools.search import evaluate as search_evaluate
from kb_tools.search import index as search_index
from kb_tools.search import rank as search_rank
from kb_tools.core.load import load_kb
from kb_tools.site.build import build_site
from test_search import SITE_QUERY_FILES

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ARTIFACTS = os.path.join(REPO, "artifacts")
FIXTURE_KB = os.path.join(HERE, "fixtures", "site", "kb")
SHIPPED_KB = os.path.join(REPO, "kb")
# Labelled query files (`queries: [{query, expect}]`) run through the site's search box: the ones
# tests/test_search.py compares the site's vectors with the whole model on (a set is added there).
QUERY_FILES = SITE_QUERY_FILES
HIT_RATE_MARGIN = 0.03   # the site's top-3 hit rate may differ from the CLI's by at most this
TYPED_TAIL = 4           # a longer query is pasted up to its last TYPED_TAIL characters, then typed
# Of a long query file, every TYPED_EVERY-th query is typed into the box (all of a short one): tests/test_site_search.py
# already ranks every labelled query with the site's own script under node and finds it identical
# to `kb search`; what typing adds (debounce, the list shown, its marks and links) needs no more.
TYPED_EVERY = {"dev.yaml": 8, "queries.yaml": 4, "queries_holdout.yaml": 2}
BOX, RESULTS = "#kb-search-input", "#kb-search-results"

BROWSER_MISSING = not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK))
if BROWSER_MISSING and os.environ.get("KB_REQUIRE_BROWSER"):  # CI sets it: there a skip would hide a failure
    raise RuntimeError(f"KB_REQUIRE_BROWSER is set but {CHROMIUM} or {CHROMEDRIVER} is missing")
pytestmark = [
    pytest.mark.skipif(BROWSER_MISSING, reason="Debian's chromium and chromium-driver are not installed "
                                               "(apt-get install -y chromium chromium-driver)"),
    # one xdist worker runs the module: one browser, each site built once
    pytest.mark.xdist_group("browser"),
]


def flat_loss_entries(kb) -> set:
    """Entries whose own symptoms say the loss is flat: what 'loss flat' should find."""
    return {e.id for e in kb.entries.values()
            if any(re.search(r"\bloss\b", s, re.I) and re.search(r"\bflat", s, re.I) for s in e.symptoms)}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


MISSES = {}  # base URL -> the paths its server answered with 404, in order
SUB_PATH = "/kb/"  # the site is served under a sub-path, as on a project page, to prove it works there
REPO_URL = "https://example.org/team/pytorch-kb"


class _SubPath(_Quiet):
    """Serves the site under SUB_PATH only; a missing file gets the site's 404.html with status
    404, as static hosts do, and every miss is recorded in the server's `misses`."""

    def send_head(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if not path.startswith(SUB_PATH):
            self.server.misses.append(path)
            self.send_error(404)
            return None
        self.path = "/" + self.path[len(SUB_PATH):]
        local = self.translate_path(self.path)
        if os.path.isdir(local):
            if not path.endswith("/"):  # as the base class does, but to the address under SUB_PATH
                self.send_response(301)
                self.send_header("Location", path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            local = os.path.join(local, "index.html")
        if os.path.exists(local):
            return super().send_head()
        self.server.misses.append(path)
        with open(os.path.join(self.directory, "404.html"), "rb") as fh:
            body = fh.read()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


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
    # the shipped site shows the committed record of verified runs (kb/verified/results.json)
    results = None if request.param == "shipped" else str(tmp_path / "none.json")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_SubPath, directory=str(site)))
    server.misses = []
    base = f"http://127.0.0.1:{server.server_address[1]}{SUB_PATH}"
    MISSES[base] = server.misses
    build_site(kb, out_dir=str(site), work_dir=str(tmp_path / "src"), results_path=results,
               site_url=base, repo_url=REPO_URL)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base, kb, request.param
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
    first, last = quote.lines
    anchor = f"L{first}" if first == last else f"L{first}-L{last}"
    _wait(driver, lambda d: d.current_url.endswith(f"/sources/{quote.source}/#{anchor}"),
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
    """`kb search`'s index of a served KB: the static token vectors, which the site's script
    embeds queries with too."""
    from kb_tools.search.embedders import static as embed
    return search_index.build_index(kb, embed.load())


def _shown(driver, query: str, ranking: str = "hybrid"):
    """The hits the box shows once it has ranked `query` the given way: [(id, matched, low, href)]."""
    driver.set_script_timeout(30)
    shown = driver.execute_async_script("""
        const [selector, query, ranking, done] = arguments, until = Date.now() + 25000;
        (function poll() {  // in the page, every 10 ms: one round trip per query
            const list = document.querySelector(selector);
            if (list && list.dataset.query === query && list.dataset.ranking === ranking) {
                return done(Array.from(list.querySelectorAll('li > a[role=option]'), (a) => [a.dataset.id,
                    a.querySelector('.kb-search__matched').textContent,
                    a.parentNode.classList.contains('kb-search__hit--low'), a.href]));
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


def _loaded(driver):
    _wait(driver, lambda d: d.execute_script("return document.querySelector('form.kb-search').dataset.loaded"),
          message="the search index and token table never finished loading")


def _open_search(driver, base):
    """The home page with the search box focused, once its index and token table have loaded (a
    list shown before the table arrived keeps its words-only order until the next keystroke)."""
    from selenium.webdriver.common.by import By
    driver.get(base)
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    box.click()
    _loaded(driver)
    return box


@pytest.mark.parametrize("query_file", QUERY_FILES, ids=os.path.basename)
def test_site_search_ranks_like_kb_search(driver, served, query_file):
    """Every query typed into the site's box shows the top 3 `kb search` prints, with its
    matched line and low-confidence mark; the site's top-3 hit rate is the CLI's (how the site's
    static vectors compare with the whole model: tests/test_search.py)."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("the labelled queries are about the shipped KB")
    index = _index(kb)
    assert index.header["dense"] is not None, "the shipped KB's index has no entry vectors"
    queries = search_evaluate.load_queries(query_file)
    typed = queries[::TYPED_EVERY.get(os.path.basename(query_file), 1)]
    _open_search(driver, base)
    site_hits = cli_hits = agree = 0
    differ = []
    for q in typed:
        query = " ".join(q["query"].split())  # an input holds one line
        _type(driver, query)
        shown = _shown(driver, query)
        want = search_rank.rank(index, query, 10)
        if [s[0] for s in shown[:3]] == [h.id for h in want[:3]]:
            agree += 1
        else:
            differ.append((query, [h.id for h in want[:3]], [s[0] for s in shown[:3]]))
        if shown and want and shown[0][0] == want[0].id:
            assert shown[0][1] == f"matched: {want[0].matched}" and shown[0][2] == want[0].low_confidence, query
            assert shown[0][3] == f"{base}entries/{want[0].id}/"
        site_hits += any(s[0] in q["expect"] for s in shown[:3])
        cli_hits += any(h.id in q["expect"] for h in want[:3])
    n = len(typed)
    print(f"\n{os.path.basename(query_file)}: {n} of {len(queries)} queries typed into the site; top 3 as kb search: "
          f"{agree}; top-3 hit rate site {site_hits / n:.3f}, kb search {cli_hits / n:.3f}")
    assert abs(site_hits - cli_hits) / n <= HIT_RATE_MARGIN
    assert differ == [], f"{len(differ)} queries rank differently on the site, e.g. {differ[:3]}"


def test_search_box_says_what_kb_search_says_beside_the_hits(driver, served):
    """A query whose leaders are close shows each one's tell-apart check, as `kb search` prints it;
    an out-of-scope query shows the scope note and marks every hit a guess."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("the queries are about the shipped KB")
    import yaml
    from kb_tools.search.answer import answer
    index = _index(kb)
    close = next(q for q in (" ".join(q["query"].split()) for q in search_evaluate.load_queries(QUERY_FILES[0]))
                 if answer(index, q).tell_apart)
    with open(os.path.join(REPO, "tests", "real_reports", "out_of_scope.yaml"), encoding="utf-8") as fh:
        outside = next(q for q in (" ".join(q["query"].split()) for q in yaml.safe_load(fh)["queries"])
                       if answer(index, q).scope)
    _open_search(driver, base)
    _type(driver, close)
    _shown(driver, close)
    shown = driver.execute_script(f"""return Array.from(document.querySelectorAll('{RESULTS} li > a'),
        (a) => [a.dataset.id, (a.querySelector('.kb-search__tell') || {{}}).textContent || null])""")
    want = answer(index, close).tell_apart
    assert {i: t for i, t in shown if t} == {i: f"tell apart: {line}" for i, line in want.items()}
    _type(driver, outside)
    shown = _shown(driver, outside)
    status = driver.execute_script("return document.querySelector('.kb-search__status').textContent")
    assert status == f"Out of scope: {answer(index, outside).scope}. The entries below are guesses."
    assert shown and all(low for _, _, low, _ in shown)


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
    _loaded(driver)
    box.send_keys("loss flat")
    shown = _shown(driver, "loss flat")
    want = [h.id for h in search_rank.rank(index, "loss flat", 10)]
    assert [s[0] for s in shown] == want
    assert box.get_attribute("aria-expanded") == "true"
    box.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN)
    selected = driver.find_element(By.CSS_SELECTOR, f"{RESULTS} li > a[aria-selected=true]")
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
    want = search_rank.rank(index, query, 10)
    assert shown[0][0] == want[0].id == "double-softmax"
    assert shown[0][1] == f"matched: {want[0].matched}" and "<script>" in shown[0][1]
    # the title's code spans render as code, never as raw backticks (the fixture's title has one)
    title = kb.entries["double-softmax"].title
    assert "`" in title
    first = driver.execute_script(f"return document.querySelector('{RESULTS} li a .kb-search__title')")
    assert "`" not in first.text and first.find_elements("css selector", "code")
    assert " ".join(first.text.split()) == " ".join(title.replace("`", "").split())
    _no_injected_script(driver)


def test_search_without_the_token_table_ranks_by_words(driver, served):
    """When the token table cannot be fetched the box ranks as `kb search --lexical` and says so."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("run once, on the shipped KB")
    index = _index(kb)
    queries = [q["query"] for q in search_evaluate.load_queries(QUERY_FILES[0])][:15]
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*static-minilm.int8"]})
    try:
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        _open_search(driver, base)
        differ_from_hybrid = 0
        for query in queries:
            _type(driver, query)
            shown = [s[0] for s in _shown(driver, query, ranking="lexical")]
            assert shown == [h.id for h in search_rank.rank(index, query, 10, dense=False)], query
            differ_from_hybrid += shown[:3] != [h.id for h in search_rank.rank(index, query, 3)]
            _wait(driver, lambda d: "ranked by words only" in d.execute_script(
                "return document.getElementById('kb-search-status').textContent"),
                message="the box does not say that it ranks by words only")
        assert differ_from_hybrid, "words-only and hybrid agree on every query: the check proves nothing"
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})


def test_a_shown_list_is_never_reordered_when_the_vectors_arrive(driver, served):
    """On a slow link the words-only hits come first; when the token table arrives later, the list
    the user can already act on keeps its order (Enter opens what they saw); the next keystroke
    ranks with the vectors, as `kb search` does."""
    base, kb, variant = served
    if variant != "shipped":
        pytest.skip("run once, on the shipped KB")
    from selenium.webdriver.common.by import By
    index = _index(kb)
    query = "loss flat"
    driver.execute_cdp_cmd("Network.enable", {})
    try:
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        # about 4 Mbit/s (a slow 4G link): the index in about 1.5 s, the 1.1 MB token table about 2 s later
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 100, "downloadThroughput": 500_000, "uploadThroughput": 250_000})
        driver.get(base)
        box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
        box.click()
        box.send_keys(query)
        first = _shown(driver, query, ranking="lexical")
        assert not driver.execute_script("return document.querySelector('form.kb-search').dataset.loaded"), \
            "the token table was already there: the check proves nothing"
        _wait(driver, lambda d: d.execute_script("return document.querySelector('form.kb-search').dataset.loaded"),
              timeout=60, message="the token table never arrived")
        time.sleep(0.3)
        kept = driver.execute_script(f"""return [document.querySelector('{RESULTS}').dataset.ranking,
            Array.from(document.querySelectorAll('{RESULTS} li > a'), (a) => a.dataset.id)]""")
        assert kept == ["lexical", [s[0] for s in first]], "the shown list changed when the vectors arrived"
        box.send_keys(" ")
        again = _shown(driver, query + " ", ranking="hybrid")
        assert [s[0] for s in again] == [h.id for h in search_rank.rank(index, query + " ", 10)]
    finally:
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})


# ---------------------------------------------------------------- look-alike links, the H1, Before/After

def _section_js(name: str) -> str:
    """JS returning the elements of the entry section under h2#`name`, up to the next h2."""
    return f"""
        const out = [];
        const h = document.getElementById('{name}');
        for (let el = h && h.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) out.push(el);
        return out;"""


def _h1(driver) -> str:
    return driver.execute_script(
        "const h = document.querySelector('article h1');"
        "return h ? h.textContent.replace('\\u00b6', '').trim() : null;")


def test_look_alike_link_in_check_opens_that_entry(driver, served):
    from selenium.webdriver.common.by import By

    from kb_tools.core.util import prose_words
    base, kb, _ = served
    names = {n: e.id for e in kb.entries.values() for n in (e.id, *e.aliases)}
    # entries whose Check names another entry, the shipped double-softmax first when it does
    pairs = [(e.id, names[w]) for e in sorted(kb.entries.values(), key=lambda e: e.id != "double-softmax")
             for w, in_code, whole, _ in prose_words(e.check) if w in names and names[w] != e.id and (whole or not in_code)]
    assert pairs, "no entry's Check names another entry"
    source, target = pairs[0]
    driver.get(f"{base}entries/{source}/")
    link = _wait(driver, lambda d: next((a for el in d.execute_script(_section_js("how-to-check"))
                                         for a in el.find_elements(By.CSS_SELECTOR, "a.kb-mention")
                                         if (a.get_attribute("href") or "").endswith(f"/entries/{target}/")), False),
                 message=f"no link to {target} in the Check section of {source}")
    e = kb.entries[target]
    plain = " ".join(e.title.replace("`", "").split())
    assert link.get_attribute("title") == plain  # the bare id says where it leads before it is followed
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    _wait(driver, lambda d: d.current_url.endswith(f"/entries/{target}/"),
          message=f"the look-alike link on {source} did not open {target}")
    assert _h1(driver) == plain  # the H1 is the plain title, the ids to type right under it
    ids = driver.find_element(By.CSS_SELECTOR, "article p.kb-ids").text
    assert ids.split()[:1 + len(e.aliases)] == [e.id, *e.aliases]
    assert target in driver.title or e.title.replace("`", "")[:20] in driver.title
    _no_injected_script(driver)


def test_fix_pair_opens_the_page_above_the_symptoms(driver, served):
    base, kb, _ = served
    paired = [e for e in kb.entries.values() if e.fix_pair]
    assert paired, "no entry has a fix_pair"
    e = next((x for x in paired if x.id == "double-softmax"), paired[0])
    driver.get(f"{base}entries/{e.id}/")
    shown = _wait(driver, lambda d: d.execute_script("""
        const top = el => el.getBoundingClientRect().top + window.scrollY;
        const badge = document.querySelector('.kb-badge'), symptoms = document.getElementById('symptoms');
        const before = document.querySelector('.kb-fix-pair .kb-before');
        const after = document.querySelector('.kb-fix-pair .kb-after');
        if (!(badge && symptoms && before && after)) return false;
        return {badge: top(badge), before: top(before), after: top(after), symptoms: top(symptoms),
                pairs: document.querySelectorAll('.kb-fix-pair').length,
                before_label: before.querySelector('strong').textContent, after_label: after.querySelector('strong').textContent,
                before_code: before.querySelector('code').innerText, after_code: after.querySelector('code').innerText,
                after_badge: (() => { const n = badge.nextElementSibling; return n && n.className; })()};"""),
        message=f"no Before/After pair on {e.id}")
    assert shown["badge"] < shown["before"] <= shown["after"] < shown["symptoms"], shown
    assert "kb-fix-pair" in shown["after_badge"] and shown["pairs"] == 1  # right under the badge, once
    assert (shown["before_label"], shown["after_label"]) == ("Before", "After")
    assert shown["before_code"].strip() == e.fix_pair["before"].strip()
    assert shown["after_code"].strip() == e.fix_pair["after"].strip()
    _no_injected_script(driver)
# ---------------------------------------------------------------- accessibility, citations, deployment

AA = 4.5  # WCAG 2 AA contrast for normal text

# The contrast of every visible piece of text on the page against what is behind it, from the
# computed styles: text colour with its alpha and every ancestor's opacity, composited over the
# element's background layers (each semi-transparent one over the next, down to an opaque one or
# the white canvas); WCAG's relative luminance and ratio. Returns [[where, text, ratio, fg, bg]].
CONTRAST_JS = """
const parse = (c) => { const m = /rgba?\\(([^)]+)\\)/.exec(c); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
const background = (el) => { const layers = [];
    for (let n = el; n; n = n.parentElement) { const c = parse(getComputedStyle(n).backgroundColor);
        if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let bg = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg); return bg; };
const opacity = (el) => { let o = 1; for (let n = el; n; n = n.parentElement) o *= Number(getComputedStyle(n).opacity); return o; };
const out = [];
let checked = 0;
for (const el of document.body.querySelectorAll("*")) {
    if (!Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    if (!el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || r.height <= 1) continue;  // visually hidden labels
    const fg = parse(getComputedStyle(el).color); fg[3] *= opacity(el);
    if (fg[3] === 0) continue;
    const bg = background(el), c = ratio(over(fg, bg), bg);
    checked++;
    if (c < arguments[0]) out.push([el.tagName.toLowerCase() + (el.className ? "." + String(el.className).split(" ")[0] : ""),
        el.textContent.trim().slice(0, 40), Math.round(c * 100) / 100, getComputedStyle(el).color, bg.map(Math.round).join(",")]);
}
for (const el of document.querySelectorAll("input[placeholder]")) {  // placeholders are text too
    if (!el.checkVisibility({opacityProperty: true, visibilityProperty: true}) || el.value) continue;
    for (const pseudo of ["::placeholder", null]) {  // the placeholder, and what will be typed
        const fg = parse(getComputedStyle(el, pseudo).color); fg[3] *= opacity(el);
        const bg = background(el), c = ratio(over(fg, bg), bg);
        checked++;
        if (c < arguments[0]) out.push(["input" + (pseudo || "") + (document.activeElement === el ? ":focus" : ""),
            el.placeholder, Math.round(c * 100) / 100, fg.join(","), bg.map(Math.round).join(",")]);
    }
}
return [checked, out];
"""


def _settle(driver):
    """Wait until the page's colour transitions (the theme fades between palettes) are over."""
    time.sleep(0.2)
    _wait(driver, lambda d: d.execute_script(
        "return document.getAnimations().every((a) => a.playState !== 'running')"), timeout=10)


def _multi_line_citation(kb):
    """(entry, quote) of the first entry citing a quote over several lines of a cached source."""
    for e in sorted(kb.entries.values(), key=lambda e: e.id):
        for qid in e.quote_ids:
            q = kb.quotes[qid]
            if q.lines and q.lines[1] > q.lines[0]:
                return e, q
    return None, None


def test_text_contrast_meets_wcag_aa_in_both_palettes(driver, served):
    """Body text, links, header, tabs, navigation, code and marked lines: >= 4.5:1 in the light
    and the dark palette, on the home page, an entry, a cited range, /folklore/ and the 404 page."""
    base, kb, variant = served
    entry, quote = _multi_line_citation(kb)
    pages = ["", "folklore/", "no-such-page/"]
    if entry:
        pages += [f"entries/{entry.id}/", f"sources/{quote.source}/#L{quote.lines[0]}-L{quote.lines[1]}"]
    failures, checked = [], 0
    try:
        for path in pages:
            driver.get(base + path)
            _wait(driver, lambda d: d.find_element("css selector", BOX))
            for scheme in ("default", "slate"):
                driver.execute_script("document.body.setAttribute('data-md-color-scheme', arguments[0])", scheme)
                _settle(driver)
                n, bad = driver.execute_script(CONTRAST_JS, AA)
                checked += n
                failures += [(path or "/", scheme, *b) for b in bad]
                if not path:  # the search box once more, focused (white field, dark placeholder)
                    driver.find_element("css selector", BOX).click()
                    _settle(driver)
                    n, bad = driver.execute_script(CONTRAST_JS, AA)
                    failures += [(path or "/", scheme, *b) for b in bad if b[0].startswith("input")]
                    driver.execute_script("document.activeElement.blur()")
    finally:
        driver.execute_script("document.body.setAttribute('data-md-color-scheme', 'default')")
    assert checked > 200, "too little text was measured: the check proves nothing"
    assert failures == [], f"{len(failures)} texts below {AA}:1, e.g. {failures[:5]}"


def test_lists_are_lists_not_headings(driver, served):
    """Entry pages and the home page: symptoms are list items, no heading sits in a list, and the
    only headings are the page title and its sections (a screen reader's outline)."""
    base, kb, _ = served
    entry = sorted(kb.entries.values(), key=lambda e: -len(e.symptoms))[0]
    driver.get(f"{base}entries/{entry.id}/")
    got = driver.execute_script("""
        const c = document.querySelector('.md-content');
        return {items: Array.from(c.querySelectorAll('ul.kb-symptoms > li'), (li) => li.textContent.trim()),
                inList: c.querySelectorAll('li h1, li h2, li h3, li h4, li h5, li h6').length,
                deep: Array.from(c.querySelectorAll('h3, h4, h5, h6'), (h) => h.textContent.trim()),
                h2: Array.from(c.querySelectorAll('h2'), (h) => h.id)};""")
    assert [" ".join(t.split()) for t in got["items"]] == [" ".join(s.split()) for s in entry.symptoms]
    assert got["inList"] == 0 and got["deep"] == []
    assert got["h2"][:3] == ["symptoms", "why-it-happens", "fix"]
    driver.get(base)
    home = driver.execute_script("""
        const c = document.querySelector('.md-content');
        return [c.querySelectorAll('li h1, li h2, li h3, li h4, li h5, li h6').length,
                c.querySelectorAll('h3, h4, h5, h6').length, c.querySelectorAll('ol > li a, ul > li a').length];""")
    assert home[0] == 0 and home[1] == 0 and home[2] > 0


def _range_state(driver, first, last):
    """Where lines first-1 .. last+1 of a source page stand: background, marked, top; header bottom."""
    return driver.execute_script("""
        const [first, last] = arguments, rows = [];
        for (let n = first - 1; n <= last + 1; n++) {
            const el = document.getElementById('L' + n);
            if (!el) { rows.push(null); continue; }
            rows.push([getComputedStyle(el).backgroundColor, el.classList.contains('kb-in-range'),
                       el.getBoundingClientRect().top]);
        }
        return [rows, document.querySelector('.md-header').getBoundingClientRect().bottom, window.innerHeight];""",
        first, last)


def test_citation_marks_the_whole_range_below_the_header(driver, served):
    """A citation over several lines opens the source with every line of the range marked (a
    computed background the lines around it lack), the first one in view below the header."""
    from selenium.webdriver.common.by import By
    base, kb, _ = served
    entry, quote = _multi_line_citation(kb)
    if entry is None:
        pytest.skip("no entry cites a range of lines")
    first, last = quote.lines
    driver.get(f"{base}entries/{entry.id}/")
    link = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, f"[data-quote='{quote.id}'] a.kb-cite"))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    _wait(driver, lambda d: d.current_url.endswith(f"/sources/{quote.source}/#L{first}-L{last}"),
          message="the citation does not carry the whole range")
    _wait(driver, lambda d: _range_state(d, first, last)[0][1][1], message="the range is not marked")
    time.sleep(1.0)  # the page settles: the tabs collapse, kb-site.js checks the position again
    rows, header, height = _range_state(driver, first, last)
    inside, outside = rows[1:-1], [r for r in (rows[0], rows[-1]) if r]
    marked = {r[0] for r in inside}
    assert all(r[1] for r in inside) and len(marked) == 1, f"not every line of {first}-{last} is marked: {inside}"
    assert marked.pop() not in ("rgba(0, 0, 0, 0)", "transparent")
    for r in outside:
        assert not r[1] and r[0] != inside[0][0], "a line outside the range looks marked"
    assert header <= inside[0][2] < height, f"line {first} is at {inside[0][2]}, the header ends at {header}"


def test_404_page_under_the_sub_path_suggests_the_entry(driver, served):
    """A mistyped address under the sub-path: the 404 page with its styles, the search box and a
    did-you-mean to the entry whose id or alias is closest; following it opens the entry."""
    from selenium.webdriver.common.by import By
    base, kb, _ = served
    misses = MISSES[base]
    entry = next((e for e in sorted(kb.entries.values(), key=lambda e: e.id) if len(e.id) > 8), None)
    typo = entry.id[:3] + entry.id[4:]  # one letter dropped
    assert typo not in kb.entries and typo.lower() not in kb.aliases
    del misses[:]
    driver.get(f"{base}entries/{typo}/")
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    assert driver.execute_script("return document.querySelector('h1').textContent").strip() == "Page not found"
    assert driver.execute_script(  # the theme's stylesheet and kb.css are applied
        "return getComputedStyle(document.querySelector('.md-header')).position") in ("sticky", "fixed")
    assert driver.execute_script("return getComputedStyle(document.querySelector('.md-tabs__link') "
                                 "|| document.body).opacity") == "1"
    suggestion = _wait(driver, lambda d: d.execute_script(
        "const b = document.getElementById('kb-did-you-mean'); return b && !b.hidden && b.querySelector('a').href"),
        message="no did-you-mean on the 404 page")
    assert suggestion == f"{base}entries/{entry.id}/"
    assert misses == [f"{SUB_PATH}entries/{typo}/"], f"assets missing under {SUB_PATH}: {misses}"
    alias_entry = next((e for e in kb.entries.values() if e.aliases and len(e.aliases[0]) >= 3), None)
    if alias_entry:
        near = alias_entry.aliases[0] + "x"
        if near.lower() not in kb.aliases and near not in kb.entries:
            driver.get(f"{base}{near}/")
            got = _wait(driver, lambda d: d.execute_script(
                "const b = document.getElementById('kb-did-you-mean'); return b && !b.hidden && b.querySelector('a').href"))
            assert got == f"{base}entries/{alias_entry.id}/"
    driver.find_element(By.CSS_SELECTOR, "#kb-did-you-mean a").click()
    _wait(driver, lambda d: "/entries/" in d.current_url and d.execute_script(
        "return document.querySelector('h1') && document.querySelector('h1').textContent !== 'Page not found'"))


@pytest.fixture(scope="module")
def served_without_site_url(tmp_path_factory):
    """The fixture KB built as `kb build` does by default (no --site-url), served under SUB_PATH."""
    kb = load_kb(FIXTURE_KB, use_cache=False)
    tmp = tmp_path_factory.mktemp("site-default")
    site = tmp / "site"
    build_site(kb, out_dir=str(site), work_dir=str(tmp / "src"), results_path=str(tmp / "none.json"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_SubPath, directory=str(site)))
    server.misses = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{SUB_PATH}", kb, server.misses
    finally:
        server.shutdown()
        server.server_close()


def test_404_page_of_a_build_without_site_url_works_under_a_sub_path(driver, served_without_site_url):
    """Built without a site URL, the 404 page still finds the site's root under a sub-path: styled,
    with its did-you-mean pointing into the sub-path."""
    from selenium.webdriver.common.by import By
    base, kb, misses = served_without_site_url
    entry = next(e for e in sorted(kb.entries.values(), key=lambda e: e.id) if len(e.id) > 8)
    typo = entry.id[:3] + entry.id[4:]
    driver.get(f"{base}entries/{typo}/")
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    assert driver.execute_script(
        "return getComputedStyle(document.querySelector('.md-header')).position") in ("sticky", "fixed")
    suggestion = _wait(driver, lambda d: d.execute_script(
        "const b = document.getElementById('kb-did-you-mean'); return b && !b.hidden && b.querySelector('a').href"),
        message="no did-you-mean on the 404 page of a default build")
    assert suggestion == f"{base}entries/{entry.id}/"
    assert driver.execute_script("return document.baseURI") == base
    # kb.css is applied (the Before label's colour is its own), the theme's script ran (the header
    # search box is mounted by kb-search.js, the did-you-mean filled by kb-site.js: both above)
    assert driver.execute_script("return getComputedStyle(document.querySelector('.md-tabs__link') "
                                 "|| document.body).opacity") == "1"
    # what was not found: the page itself, the root probe's first guess (the domain root), and what
    # the browser's preload scanner fetched ahead of the probe, relative to the missing address
    assert all(m in (f"{SUB_PATH}entries/{typo}/", "/javascripts/kb-names.json")
               or m.startswith(f"{SUB_PATH}entries/{typo}/") for m in misses), misses


def test_pages_under_the_sub_path_load_every_asset(driver, served):
    """An entry and a source page served under /kb/: nothing they or the search box fetch is missing,
    and every page names its canonical address and (entries) the YAML file to edit."""
    from selenium.webdriver.common.by import By
    base, kb, _ = served
    misses = MISSES[base]
    entry = sorted(kb.entries.values(), key=lambda e: e.id)[0]
    del misses[:]
    driver.get(f"{base}entries/{entry.id}/")
    box = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, BOX))
    box.click()
    _loaded(driver)
    box.send_keys("loss")
    _shown(driver, "loss")
    assert driver.execute_script("return document.querySelector('link[rel=canonical]').href") == \
        f"{base}entries/{entry.id}/"
    edit = driver.find_element(By.CSS_SELECTOR, ".kb-edit a").get_attribute("href")
    assert edit == f"{REPO_URL}/edit/main/{entry.path}"
    driver.get(f"{base}sources/{sorted(kb.sources)[0]}/")
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, ".kb-source"))
    assert misses == [], f"missing under {SUB_PATH}: {misses}"


def _longest_snippet_lines(kb, n=3):
    return sorted(kb.entries.values(), key=lambda e: -max(map(len, (e.snippet or "").splitlines() or [""])))[:n]


def test_snippet_code_fits_at_1280(driver, served):
    """No code block of the entries with the longest snippet lines scrolls sideways at 1280 px."""
    base, kb, _ = served
    assert driver.execute_script("return window.innerWidth") >= 1200
    for entry in _longest_snippet_lines(kb):
        driver.get(f"{base}entries/{entry.id}/")
        wide = driver.execute_script("""
            return Array.from(document.querySelectorAll('.md-content pre, .md-content pre > code'))
                .filter((el) => el.scrollWidth > el.clientWidth + 1).map((el) => [el.scrollWidth, el.clientWidth]);""")
        assert wide == [], f"{entry.id}: code scrolls sideways {wide}"


def test_phone_width_has_no_horizontal_scroll(driver, served):
    """At 390 px: home, an entry with long snippet lines, a cited range, /folklore/ and the 404 page
    fit the width; the cited range's first line is below the header there too."""
    base, kb, _ = served
    entry, quote = _multi_line_citation(kb)
    pages = ["", f"entries/{_longest_snippet_lines(kb, 1)[0].id}/", "folklore/", "no-such-page/"]
    if entry:
        pages.append(f"sources/{quote.source}/#L{quote.lines[0]}-L{quote.lines[1]}")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True})
    try:
        for path in pages:
            driver.get(base + path)
            _wait(driver, lambda d: d.find_element("css selector", ".md-header"))
            time.sleep(0.3)
            width, scroll = driver.execute_script(
                "return [window.innerWidth, document.scrollingElement.scrollWidth]")
            assert width == 390 and scroll <= width, f"/{path} scrolls sideways at 390 px: {scroll} > {width}"
            if path.startswith("sources/"):
                rows, header, height = _range_state(driver, *quote.lines)
                assert all(r[1] for r in rows[1:-1]) and header <= rows[1][2] < height
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
# ---------------------------------------------------------------- the indexes: symptoms, tags, entries

def _in_view(driver, element_id: str):
    """The element's text when it is fully in view below the fixed header, else False."""
    return driver.execute_script("""
        const el = document.getElementById(arguments[0]);
        if (!el) return false;
        const r = el.getBoundingClientRect();
        const header = document.querySelector('.md-header').getBoundingClientRect().bottom;
        return r.top >= header && r.bottom <= window.innerHeight ? el.textContent : false;""", element_id)


def test_symptom_index_is_grouped_by_sign_and_lands_on_the_symptom(driver, served):
    """/symptoms/ lists every sign on its first screen, in the order people arrive (a flat loss
    first); each sign's page (or its pages per area) lists each symptom once, a short line under
    its area; following a line opens the entry with that symptom in view."""
    from selenium.webdriver.common.by import By

    from kb_tools.site.build import ARRIVAL_ORDER, SHORT_LINE, symptom_sign
    base, kb, variant = served
    driver.get(f"{base}symptoms/")
    signs = _wait(driver, lambda d: d.execute_script("""
        return Array.from(document.querySelectorAll('.md-content ul.kb-sign-list a'),
                          (a) => [a.getAttribute('href'), a.getBoundingClientRect().bottom <= window.innerHeight]);"""))
    keys = [href.strip("/") for href, _ in signs]
    used = {symptom_sign(s) for e in kb.entries.values() for s in e.symptoms}
    assert keys == [k for k in ARRIVAL_ORDER if k in used] and all(shown for _, shown in signs), signs
    os.makedirs(ARTIFACTS, exist_ok=True)
    driver.save_screenshot(os.path.join(ARTIFACTS, f"site-{variant}-symptoms.png"))
    expected = {f"entries/{e.id}/#symptom-{n}": (symptom_sign(s), e.area)
                for e in kb.entries.values() for n, s in enumerate(e.symptoms, 1)}
    seen = {}
    for key in keys:
        driver.get(f"{base}symptoms/{key}/")
        more = driver.execute_script("return Array.from(document.querySelectorAll('.md-content a.kb-more'), (a) => a.href)")
        for url in more or [f"{base}symptoms/{key}/"]:
            if more:
                driver.get(url)
            area = url.removeprefix(f"{base}symptoms/{key}/").strip("/") or None
            items = driver.execute_script("""
                const out = [];
                for (const el of document.querySelectorAll('.md-content h2, .md-content li')) {
                    if (el.tagName === 'H2') { out.push([el.id, null, null]); continue; }
                    const a = el.querySelector('a');
                    out.push([null, new URL(a.getAttribute('href'), location.href).href, a.textContent]);
                }
                return out;""")
            current = area
            for heading, href, text in items:
                if heading is not None:
                    current = heading.removeprefix(f"sign-{key}-")
                    continue
                path = href.removeprefix(base)  # the site is served under a sub-path
                assert path not in seen, f"{path} listed twice"
                seen[path] = (key, current)
                assert len(text) <= SHORT_LINE, text
    assert seen == expected

    # a symptom far down its entry: the link must land on it, not on the top of the page
    e, n = max(((e, len(e.symptoms)) for e in kb.entries.values()), key=lambda en: en[1])
    key = symptom_sign(e.symptoms[n - 1])
    driver.get(f"{base}symptoms/{key}/")
    if driver.find_elements(By.CSS_SELECTOR, ".md-content a.kb-more"):
        driver.get(f"{base}symptoms/{key}/{e.area}/")
    link = driver.find_element(By.CSS_SELECTOR, f".md-content a[href$='entries/{e.id}/#symptom-{n}']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    _wait(driver, lambda d: d.current_url == f"{base}entries/{e.id}/#symptom-{n}",
          message="the symptom link did not open the entry at the symptom")
    shown = _wait(driver, lambda d: _in_view(d, f"symptom-{n}"),
                  message=f"symptom {n} of {e.id} is not in view after following its link")
    assert " ".join(shown.split()) == " ".join(re.sub(r"`+", "", e.symptoms[n - 1]).split())
    _no_injected_script(driver)


def test_tags_page_shows_only_vocabulary_tags_with_their_meaning(driver, served):
    base, kb, _ = served
    driver.get(f"{base}tags/")
    tags = _wait(driver, lambda d: d.execute_script("""
        return Array.from(document.querySelectorAll('.md-content h2'), (h) => {
            let el = h.nextElementSibling;
            return [h.firstChild.textContent.trim(), el && el.matches('p.kb-tag-meaning') ? el.textContent : null,
                    el && el.nextElementSibling ? el.nextElementSibling.querySelectorAll('li').length : 0];
        });"""))
    used = {}
    for e in kb.entries.values():
        for t in e.tags:
            used[t] = used.get(t, 0) + 1
    assert sorted(t for t, _, _ in tags) == sorted(used)
    for tag, meaning, count in tags:
        assert tag in kb.vocabulary and meaning == kb.vocabulary[tag] and count == used[tag], tag


def test_entries_table_and_nav_follow_the_triage_path(driver, served):
    """/entries/ is a table (id and aliases, title, area, first symptom), the first-hour checklist first,
    that fits 1280 px and 390 px; the nav's triage section lists the same ids in the same order."""
    from selenium.webdriver.common.by import By

    from kb_tools.core.model import AREAS, TRIAGE_PATH
    base, kb, variant = served
    driver.get(f"{base}entries/")
    rows = _wait(driver, lambda d: d.execute_script("""
        return Array.from(document.querySelectorAll('.md-content table tbody tr'),
                          (tr) => Array.from(tr.cells, (c) => c.textContent.trim()));"""))
    triage = [i for i in TRIAGE_PATH if i in kb.entries]
    rest = sorted((e.id for e in kb.entries.values() if e.id not in triage),
                  key=lambda i: (AREAS.index(kb.entries[i].area), i))
    assert [r[0].split()[0] for r in rows] == triage + rest
    assert [r[0].split()[1:] for r in rows] == [kb.entries[r[0].split()[0]].aliases for r in rows]
    assert [" ".join(r[1].split()) for r in rows] == [" ".join(kb.entries[r[0].split()[0]].title.replace("`", "").split())
                                                     for r in rows]
    os.makedirs(ARTIFACTS, exist_ok=True)
    driver.save_screenshot(os.path.join(ARTIFACTS, f"site-{variant}-entries.png"))
    nav = driver.execute_script("""
        return Array.from(document.querySelectorAll('.md-nav--primary a[href]'),
                          (a) => [a.href, a.textContent.trim()]);""")
    nav = [(href.removeprefix(base), text) for href, text in nav]  # the site is served under a sub-path
    nav_triage = [text for path, text in nav if path.startswith("entries/") and path.strip("/").split("/")[-1] in triage]
    assert nav_triage == triage
    # the table fits the column at both widths: no sideways scroll, no cell cut off
    for width, height in ((1280, 900), (390, 844)):
        _viewport(driver, width, height)
        try:
            driver.get(f"{base}entries/")
            fit = _wait(driver, lambda d: d.execute_script("""
                const t = document.querySelector('.md-content table');
                if (!t) return false;
                const box = t.closest('article').getBoundingClientRect();
                const cut = Array.from(t.querySelectorAll('td'), (c) => c.scrollWidth > c.clientWidth + 1).filter(Boolean).length;
                return [t.getBoundingClientRect().right <= box.right + 1, cut,
                        document.scrollingElement.scrollWidth <= window.innerWidth];"""))
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        assert fit == [True, 0, True], (width, fit)
    driver.get(f"{base}entries/")
    first = driver.find_element(By.CSS_SELECTOR, ".md-content table tbody tr a")
    first.click()
    _wait(driver, lambda d: d.current_url == f"{base}entries/{triage[0] if triage else rest[0]}/")
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
    from kb_tools.snippets import runner as snippets
    from kb_tools.snippets import verified
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
    # tick labels readable at both widths, axes named, the caption no larger than the data
    for width, height in ((1280, 900), (390, 844)):
        _viewport(driver, width, height)
        try:
            driver.get(base + f"entries/{eid}/")
            _curve(driver)
            ticks, names, caption = driver.execute_script(CURVE_TEXT_JS)
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        assert ticks and min(ticks) >= 11, f"tick labels of {min(ticks):.1f} px at {width} px"
        assert {"step"} <= set(names) and any(n.startswith("loss") for n in names), names
        assert caption <= min(ticks) + 0.5, f"the caption ({caption} px) is larger than the tick labels at {width} px"


# Rendered sizes in CSS px: a text of the curve is drawn in the SVG's units, scaled to the shown width.
CURVE_TEXT_JS = """
    const svg = document.querySelector('svg.kb-curves');
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const px = (t) => parseFloat(getComputedStyle(t).fontSize) * scale;
    return [Array.from(svg.querySelectorAll('text.kb-tick'), px),
            Array.from(svg.querySelectorAll('text.kb-axis-label'), (t) => t.textContent),
            parseFloat(getComputedStyle(document.querySelector('.kb-curves-figure figcaption')).fontSize)];"""


def _viewport(driver, width: int, height: int) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def _first_screen_candidates(kb, n: int = 4) -> list:
    """The entries whose page top is tallest: the longest titles and the longest fix pairs."""
    def height(e):
        pair = max(len(e.fix_pair["before"].splitlines()), 1) + max(len(e.fix_pair["after"].splitlines()), 1) \
            if e.fix_pair else 0
        return len(e.title) / 60 + pair + len(str(e.fix)) / 600
    return sorted(kb.entries.values(), key=lambda e: (-height(e), e.id))[:n]


def test_entry_page_answer_is_on_the_first_screen(driver, served):
    """At 1280x900 the title (H1), what to do, the verified badge and the whole before/after pair
    are above the fold, on the entries whose top is tallest."""
    base, kb, _ = served
    _viewport(driver, 1280, 900)
    try:
        shown_pages = {}
        for e in _first_screen_candidates(kb):
            driver.get(f"{base}entries/{e.id}/")
            _wait(driver, lambda d: d.find_element("css selector", "article h1"))
            shown_pages[e.id] = driver.execute_script(FIRST_SCREEN_JS)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    for eid, shown in shown_pages.items():
        e = kb.entries[eid]
        assert shown["height"] == 900
        assert shown["h1"][1] == " ".join(re.sub(r"`+", "", e.title).split()), e.id
        for name in ("todo", "badge") + (("pair",) if e.fix_pair else ()):
            assert shown[name] is not None and shown[name] <= shown["height"], (e.id, name, shown)


FIRST_SCREEN_JS = """
            const out = {};
            for (const [name, sel] of [['h1', 'article h1'], ['todo', '.kb-todo'], ['badge', '.kb-badge'],
                                       ['pair', '.kb-fix-pair']]) {
                const el = document.querySelector(sel);
                out[name] = el ? el.getBoundingClientRect().bottom : null;
            }
            out.height = window.innerHeight;
            out.h1 = [out.h1, document.querySelector('article h1').textContent.replace('¶', '').trim()];
            return out;"""


# ---------------------------------------------------------------- accessibility: axe-core

AXE = os.path.join(REPO, "node_modules", "axe-core", "axe.min.js")


def _axe(driver) -> list:
    """axe-core's violations on the page as shown: [(rule, impact, the first three targets)]."""
    with open(AXE, encoding="utf-8") as fh:
        driver.execute_script(fh.read())
    driver.set_script_timeout(60)
    found = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        axe.run(document, {resultTypes: ['violations']}).then(
            (r) => done(r.violations.map((v) => [v.id, v.impact, v.nodes.slice(0, 3).map((n) => n.target.join(' '))])),
            (e) => done([['axe-error', String(e), []]]));""")
    return found


def _axe_pages(kb) -> list:
    """Home, an entry with a loss curve (else any), a distributed entry, a source page, the indexes
    and the 404 page."""
    from kb_tools.snippets import runner as snippets
    from kb_tools.snippets import verified
    curves = [eid for eid, e in sorted(kb.entries.items())
              if (verified.load_curves(verified.default_dir(kb.root), eid) or {}).get("snippet_sha256")
              == verified.snippet_sha256(snippets.script_text(e))]
    distributed = sorted(e.id for e in kb.entries.values() if e.launch == "torchrun")
    pages = ["", f"entries/{(curves or sorted(kb.entries))[0]}/"]
    pages += [f"entries/{distributed[0]}/"] if distributed else []
    pages += [f"sources/{sorted(kb.sources)[0]}/", "symptoms/", "entries/", "folklore/", "no-such-page/"]
    return pages


@pytest.mark.skipif(not os.path.exists(AXE) and not os.environ.get("KB_REQUIRE_BROWSER"),
                    reason="axe-core is not installed (npm ci)")
def test_axe_core_finds_no_violation(driver, served):
    """axe-core 4.14 (package.json) on every kind of page at 1280x900 and 390x844, and with the search
    results open: no violation of any rule, at any impact."""
    assert os.path.exists(AXE), f"{AXE} is missing: run npm ci (CI installs it)"
    base, kb, _ = served
    failures = {}
    for width, height in ((1280, 900), (390, 844)):
        _viewport(driver, width, height)
        try:
            for path in _axe_pages(kb):
                driver.get(base + path)
                _wait(driver, lambda d: d.find_element("css selector", ".md-header"))
                found = _axe(driver)
                if found:
                    failures[f"/{path} at {width} px"] = found
            _open_search(driver, base)
            _type(driver, "loss flat")
            _wait(driver, lambda d: d.find_elements("css selector", f"{RESULTS} li a"))
            found = _axe(driver)
            if found:
                failures[f"search results open at {width} px"] = found
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert not failures, failures


@pytest.fixture(scope="module")
def changed_copy(tmp_path_factory):
    """A copy of the fixture KB whose record vouches for every snippet as it was, then one
    snippet edited (double-softmax) and one record dropped (lr-too-low)."""
    import shutil

    from kb_tools.snippets import runner as snippets
    from kb_tools.snippets import verified
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
