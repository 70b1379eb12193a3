"""Review the built docs site the way a person mid-debug meets it, in headless Chromium.

For a set of pages (home, an entry with a loss curve, a distributed entry, a source page,
/symptoms/, /entries/, /folklore/, the 404 page) at 1280x900 and 390x844 it reports:

- where the answer sits on an entry page: the bottom of the H1, the before/after pair and
  the verified badge, in CSS pixels from the top (the first screen ends at 900 / 844);
- the HTML size of each index page and how tall it renders;
- the smallest tick label of a loss curve as rendered (px);
- axe-core's violations (node_modules/axe-core, `npm ci`), per page and viewport, and with
  the search results open on the home page.

    python bench/site_review.py [--site DIR] [--json FILE]

Without --site it builds the shipped KB into a temporary folder, served under /kb/.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

AXE = os.path.join(REPO, "node_modules", "axe-core", "axe.min.js")
VIEWPORTS = {"desktop": (1280, 900), "mobile": (390, 844)}
PAGES = {
    "home": "",
    "entry-with-curve": "entries/lr-too-high/",
    "distributed-entry": "entries/rank-divergent-data/",
    "source": "sources/karpathy-recipe-2019/",
    "symptoms": "symptoms/",
    "entries": "entries/",
    "folklore": "folklore/",
    "404": "no-such-page/",
}
SUB_PATH = "/kb/"


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site under SUB_PATH; a missing file gets 404.html, as static hosts do."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith(SUB_PATH):
            self.path = "/" + self.path[len(SUB_PATH):]
            local = self.translate_path(self.path)
            if os.path.isdir(local):
                local = os.path.join(local, "index.html")
            if os.path.exists(local):
                return super().send_head()
        import io
        with open(os.path.join(self.directory, "404.html"), "rb") as fh:
            body = fh.read()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    return driver


def set_viewport(driver, width: int, height: int) -> None:
    """The layout viewport itself (window size includes chrome in headless=new on some builds)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


POSITIONS_JS = """
const top = el => el ? Math.round(el.getBoundingClientRect().top + window.scrollY) : null;
const bottom = el => el ? Math.round(el.getBoundingClientRect().bottom + window.scrollY) : null;
const h1 = document.querySelector('article h1');
return {
  h1: h1 ? h1.textContent.trim() : null,
  h1_bottom: bottom(h1),
  pair_bottom: bottom(document.querySelector('.kb-fix-pair')),
  badge_bottom: bottom(document.querySelector('.kb-verified, .kb-badge')),
  page_height: document.documentElement.scrollHeight,
  min_tick_px: (() => {
    let min = null;
    for (const t of document.querySelectorAll('.kb-curves-figure svg text')) {
      const px = t.getBoundingClientRect().height;
      if (px > 0 && (min === null || px < min)) min = px;
    }
    return min && Math.round(min * 10) / 10;
  })(),
};
"""


def run_axe(driver, source: str) -> list:
    driver.execute_script(source)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations.map("
        "v => ({id: v.id, impact: v.impact, nodes: v.nodes.length, "
        "targets: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))), e => done(String(e)));")
    return result


def review(base: str, site_dir: str) -> dict:
    from selenium.webdriver.common.by import By
    axe_source = open(AXE, encoding="utf-8").read() if os.path.exists(AXE) else None
    report: dict = {"pages": {}, "sizes": {}}
    for name in ("symptoms", "entries", "folklore"):
        path = os.path.join(site_dir, PAGES[name], "index.html")
        report["sizes"][name] = os.path.getsize(path)
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        driver.set_script_timeout(60)
        try:
            for view, (width, height) in VIEWPORTS.items():
                set_viewport(driver, width, height)
                for name, path in PAGES.items():
                    driver.get(base + path)
                    time.sleep(0.3)
                    row = driver.execute_script(POSITIONS_JS)
                    row["axe"] = run_axe(driver, axe_source) if axe_source else "axe-core not installed"
                    report["pages"][f"{name}@{view}"] = row
                # the search results open on the home page
                driver.get(base)
                box = driver.find_element(By.CSS_SELECTOR, "#kb-search-input")
                box.click()
                box.send_keys("loss flat")
                time.sleep(1.5)
                report["pages"][f"home-search-open@{view}"] = {
                    "axe": run_axe(driver, axe_source) if axe_source else "axe-core not installed"}
        finally:
            driver.quit()
    return report


def first_screen(base: str, site_dir: str) -> dict:
    """{entry id: the bottom (px) of the lowest of its H1, what-to-do line, badge and fix pair}."""
    ids = sorted(d for d in os.listdir(os.path.join(site_dir, "entries"))
                 if os.path.isdir(os.path.join(site_dir, "entries", d)))
    out = {}
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            set_viewport(driver, *VIEWPORTS["desktop"])
            for eid in ids:
                driver.get(f"{base}entries/{eid}/")
                out[eid] = round(driver.execute_script(
                    "return Math.max(...['article h1', '.kb-todo', '.kb-badge', '.kb-fix-pair'].map("
                    "(s) => { const el = document.querySelector(s); return el ? el.getBoundingClientRect().bottom : 0; }))"))
        finally:
            driver.quit()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", help="a built site folder (default: build the shipped KB)")
    parser.add_argument("--json", help="write the report as JSON here")
    parser.add_argument("--every-entry", action="store_true",
                        help="also load every entry page at 1280x900 and count those whose answer (H1, what to do, "
                             "badge, fix pair) ends above the fold")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        served = site or os.path.join(tmp, "site")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=served))
        base = f"http://127.0.0.1:{server.server_address[1]}{SUB_PATH}"
        if not site:
            from kb_tools.core.load import load_kb
            from kb_tools.site.build import build_site
            site = os.path.join(tmp, "site")
            print("building the shipped KB's site ...", file=sys.stderr)
            build_site(load_kb(os.path.join(REPO, "kb"), use_cache=False), out_dir=site,
                       work_dir=os.path.join(tmp, "src"), site_url=base)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            report = review(base, site)
            if args.every_entry:
                report["first_screen"] = first_screen(base, site)
        finally:
            server.shutdown()
    for key, row in report["pages"].items():
        axe = row.pop("axe")
        found = axe if isinstance(axe, str) else ", ".join(f"{v['id']}({v['nodes']})" for v in axe) or "none"
        print(f"{key:28} {json.dumps({k: v for k, v in row.items() if v is not None})}")
        print(f"{'':28} axe: {found}")
        row["axe"] = axe
    print("HTML bytes:", report["sizes"])
    if "first_screen" in report:
        rows = report["first_screen"]
        late = {eid: bottom for eid, bottom in rows.items() if bottom > VIEWPORTS["desktop"][1]}
        print(f"entry pages whose answer ends above the fold at 1280x900: {len(rows) - len(late)} of {len(rows)}; "
              f"lowest {max(rows.values())} px" + (f"; below it: {late}" if late else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
