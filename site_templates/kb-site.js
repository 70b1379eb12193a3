/* Two small behaviours of the docs site, on plain pages (no framework):
 *
 * - Cited ranges: on a source page, `#L12-L18` marks every line from 12 to 18 (class
 *   kb-in-range) and scrolls so that line 12 sits below the sticky header, whatever the
 *   header and tabs measure at that moment. `#L12` marks the one line.
 * - Did you mean: on the 404 page, the missing address is compared with every entry id and
 *   alias (javascripts/kb-names.json, written by `kb build`) and the closest is offered.
 */
(function () {
  "use strict";
  const RANGE = /^#L(\d+)(?:-L(\d+))?$/;
  const script = document.currentScript;
  const root = new URL("..", script ? script.src : document.baseURI); // the site's root

  function headerBottom() {
    const header = document.querySelector(".md-header");
    return header ? Math.max(0, header.getBoundingClientRect().bottom) : 0;
  }

  function markRange(scroll) {
    document.querySelectorAll(".kb-line.kb-in-range").forEach((el) => el.classList.remove("kb-in-range"));
    const m = RANGE.exec(location.hash);
    if (!m) return;
    const first = Number(m[1]), last = Math.max(first, Number(m[2] || m[1]));
    const top = document.getElementById(`L${first}`);
    if (!top || !top.classList.contains("kb-line")) return;
    for (let n = first; n <= last; n++) {
      const line = document.getElementById(`L${n}`);
      if (!line) break;
      line.classList.add("kb-in-range");
    }
    if (scroll) place(top);
  }

  // Bring the first line two lines below the header when it is under the header or far below
  // it. The theme collapses its tabs once the page scrolls, which moves the content up after
  // the jump, so the check runs again as the page settles, unless the reader has scrolled.
  let touched = false;
  ["wheel", "touchstart", "keydown", "mousedown"].forEach((type) =>
    window.addEventListener(type, () => { touched = true; }, { passive: true }));

  function place(top) {
    touched = false;
    const check = () => {
      if (touched) return;
      const gap = top.getBoundingClientRect().top - headerBottom();
      const line = parseFloat(getComputedStyle(top).lineHeight) || 16;
      if (gap < 1.5 * line || gap > Math.max(4 * line, window.innerHeight / 3)) window.scrollBy(0, gap - 2 * line);
    };
    check();
    [100, 300, 700].forEach((ms) => setTimeout(check, ms));
  }

  // ------------------------------------------------------------ did you mean

  function distance(a, b) { // Levenshtein, two rows
    let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      const row = [i];
      for (let j = 1; j <= b.length; j++) {
        row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      }
      prev = row;
    }
    return prev[b.length];
  }

  /** The closest [name, id] to `wanted` among ids and aliases, or null when none is close. */
  function closest(wanted, names) {
    let best = null;
    for (const [name, id] of names) {
      const d = distance(wanted, name.toLowerCase());
      if (best === null || d < best[0]) best = [d, name, id];
    }
    if (!best) return null;
    const allowed = Math.max(2, Math.floor(best[1].length / 3));
    return best[0] <= allowed ? [best[1], best[2]] : null;
  }

  function didYouMean(box) {
    const base = root.pathname;
    let path = decodeURIComponent(location.pathname);
    path = path.startsWith(base) ? path.slice(base.length) : path.replace(/^\/+/, "");
    const parts = path.split("/").filter((p) => p && p !== "index.html" && p !== "entries");
    const wanted = (parts[parts.length - 1] || "").replace(/\.(html?|md|ya?ml)$/i, "").toLowerCase();
    if (!wanted) return;
    fetch(new URL("javascripts/kb-names.json", root)).then((r) => r.json()).then((table) => {
      const names = Object.entries(table.names);
      const hit = closest(wanted, names);
      if (!hit) return;
      const [name, id] = hit;
      const link = box.querySelector("a");
      link.href = new URL(`entries/${encodeURIComponent(id)}/`, root).href;
      link.textContent = name === id ? table.titles[id] : `${name}: ${table.titles[id]}`;
      box.hidden = false;
    }).catch(() => {});
  }

  // Loss curves are drawn 560 units wide and scaled to the column: on a narrow screen the tick
  // labels would shrink with the drawing, so their size is set in drawing units that come out
  // at READABLE_PX or more, whatever the shown width.
  const READABLE_PX = 12;
  function readableCurves() {
    const svgs = document.querySelectorAll("svg.kb-curves");
    if (!svgs.length) return;
    const fit = () => svgs.forEach((svg) => {
      const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
      if (!(scale > 0)) return;
      const units = Math.max(13, READABLE_PX / scale);
      svg.querySelectorAll("text").forEach((t) => { t.style.fontSize = `${units.toFixed(1)}px`; });
    });
    fit();
    if (window.ResizeObserver) new ResizeObserver(fit).observe(svgs[0]);
  }

  // The theme labels a nav section that has its own index page by an icon-only label, so every
  // such section is a navigation landmark with no name (axe-core: landmark-unique). Each gets
  // its section title as its name.
  function nameNavSections() {
    document.querySelectorAll("nav.md-nav[aria-labelledby]").forEach((nav) => {
      const label = document.getElementById(nav.getAttribute("aria-labelledby"));
      if (label && label.textContent.trim()) return;
      const title = nav.querySelector(":scope > .md-nav__title");
      if (title && title.textContent.trim()) {
        nav.removeAttribute("aria-labelledby");
        nav.setAttribute("aria-label", title.textContent.trim());
      }
    });
  }

  // The theme wraps each code block's copy button in a <nav>, added after load: a row of
  // navigation landmarks with no name. A copy button is not navigation; the wrapper loses the role.
  function unmarkCodeNavs(root) {
    root.querySelectorAll("nav.md-code__nav:not([role])").forEach((nav) => nav.setAttribute("role", "none"));
  }

  function start() {
    nameNavSections();
    unmarkCodeNavs(document);
    if (window.MutationObserver) {
      new MutationObserver(() => unmarkCodeNavs(document)).observe(document.body, { childList: true, subtree: true });
    }
    readableCurves();
    if (document.querySelector(".kb-source")) {
      markRange(true);
      window.addEventListener("hashchange", () => markRange(true));
    }
    const box = document.getElementById("kb-did-you-mean");
    if (box) didYouMean(box);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
  // the browser's own jump to the fragment comes with the load event; check the header after it
  if (document.readyState !== "complete") window.addEventListener("load", () => markRange(true), { once: true });
})();
