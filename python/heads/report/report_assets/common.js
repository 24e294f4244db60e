/* common.js: what the run and sweep pages share: DOM helpers, the colour scale, number format,
 * sortable tables, and the start-up that picks the page kind from the embedded data.
 * Knows nothing of results files. */
"use strict";

/* el(tag, attrs, parent, html): a new element, appended to parent when given; html is the page's
 * own markup (setMarkup), and a string from the file inside it goes through escapeHtml */
function el(tag, attrs, parent, html) {
  const e = document.createElement(tag);
  for (const k in (attrs || {})) e.setAttribute(k, attrs[k]);
  if (html !== undefined) setMarkup(e, html);
  if (parent) parent.appendChild(e);
  return e;
}

/* The one place markup enters the page (no innerHTML elsewhere). Parsed in an inert <template>
 * (nothing in it runs or loads), then stripped of what could run: elements that hold or fetch
 * code, every on* handler, javascript: and data: links. A results file is anyone's: its strings
 * are escaped where they are put into markup, this is the wall behind that, and the page's
 * Content-Security-Policy (no inline handlers, no script but the page's own) the one behind it. */
const UNSAFE_TAGS = new Set(["SCRIPT", "IFRAME", "OBJECT", "EMBED", "LINK", "META", "BASE", "FORM",
                             "STYLE", "FRAME", "FRAMESET", "TEMPLATE", "NOSCRIPT", "foreignObject"]);
function setMarkup(e, html) {
  const t = document.createElement("template");
  t.innerHTML = String(html);
  const walk = node => {
    for (const child of Array.from(node.children)) {
      if (UNSAFE_TAGS.has(child.tagName) || UNSAFE_TAGS.has(child.tagName.toUpperCase())) {
        child.remove();
        continue;
      }
      for (const a of Array.from(child.attributes)) {
        const name = a.name.toLowerCase(), value = a.value.replace(/[\s\u0000-\u001f]/g, "").toLowerCase();
        if (name.startsWith("on") || name === "srcdoc" ||
            (/(^|:)(href|src|action|formaction|xlink:href)$/.test(name) && /^(javascript|data|vbscript):/.test(value)))
          child.removeAttribute(a.name);
      }
      walk(child);
    }
  };
  walk(t.content);
  e.replaceChildren(t.content);
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

/* the colour scale of every map, white (0) to dark blue (1), as scripts/plot's palette */
const STOPS = [[0, [255, 255, 255]], [0.1, [222, 235, 247]], [0.3, [158, 202, 225]],
               [0.5, [66, 146, 198]], [0.75, [8, 81, 156]], [1, [8, 48, 107]]];
const MASKED = [217, 217, 217];
const LUT = (() => {
  const out = [];
  for (let k = 0; k <= 255; k++) {
    const t = k / 255;
    let i = 1;
    while (i < STOPS.length - 1 && STOPS[i][0] < t) i++;
    const [t0, c0] = STOPS[i - 1], [t1, c1] = STOPS[i];
    const u = (t - t0) / (t1 - t0);
    out.push(c0.map((a, j) => Math.round(a + u * (c1[j] - a))));
  }
  return out;
})();
const GRADIENT_CSS = "linear-gradient(to right," + STOPS.map(([t, c]) => `rgb(${c}) ${t * 100}%`).join(",") + ")";

function colour(v) {
  if (v === null || !isFinite(v)) return MASKED;
  return LUT[Math.max(0, Math.min(255, Math.round(v * 255)))];
}

/* a cell background for v on a scale of [0, vmax] (negative values in red) */
function tint(v, vmax) {
  if (v === null || v === undefined || !isFinite(v) || !vmax) return "";
  const t = Math.min(1, Math.abs(v) / vmax);
  if (v < 0) return `background: rgba(214, 39, 40, ${0.6 * t})`;
  const c = colour(t);
  return `background: rgb(${c}); color: ${t > 0.55 ? "white" : "inherit"}`;
}

function fmtNum(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (!isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return v.toFixed(a >= 100 ? 1 : a >= 1 ? 3 : 4);
}

/* "1 seed", "3 seeds": a count with its noun (as python/heads/core/words.py's plural) */
function plural(n, noun) {
  return `${n} ${n === 1 ? noun : noun + "s"}`;
}

/* a colour per head class (as scripts/plot-sweep's head_classes figure) */
const CLASS_COLOURS = { prev: "#1f77b4", self: "#2ca02c", first: "#ff7f0e", induction: "#d62728",
                        duplicate: "#9467bd", mixed: "#c7c7c7" };

/* distinct colours for up to ~24 lines (heads of a layer, series of a sweep) */
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                 "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173",
                 "#e7969c", "#6b6ecf", "#b5cf6b", "#d6616b", "#9c9ede", "#e7ba52", "#843c39",
                 "#5254a3", "#8ca252", "#ce6dbd"];
function headColour(h, n) {
  if (n <= PALETTE.length) return PALETTE[h % PALETTE.length];
  return `hsl(${Math.round(360 * h / n)}, 65%, 45%)`;
}

/* sortableTable(parent, id, cols [[key, title]], rows [{key: value}], fmt(k, v), style(k, v)):
 * clicking a title sorts by that column (numbers numerically), again for the other direction */
function sortableTable(parent, id, cols, rows, fmt, style) {
  const t = el("table", { class: "data", id }, parent);
  const head = el("tr", {}, el("thead", {}, t));
  const body = el("tbody", {}, t);
  const ths = cols.map(([k, title]) => el("th", { class: "sortable" + (typeof rows[0][k] === "string" ? " l" : ""),
                                                  "data-key": k, "aria-sort": "none" }, head, escapeHtml(title)));
  function render() {
    body.replaceChildren();
    for (const r of rows) {
      const tr = el("tr", {}, body);
      for (const [k] of cols) {
        const v = r[k];
        const td = el("td", { class: typeof v === "string" ? "l" : "", style: style ? style(k, v) : "" }, tr);
        td.textContent = fmt(k, v);
        if (v !== null && v !== undefined) td.dataset.value = v;
        else td.dataset.value = "";
      }
    }
  }
  ths.forEach((th, i) => th.addEventListener("click", () => {
    const k = cols[i][0];
    const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    ths.forEach(x => x.setAttribute("aria-sort", "none"));
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir;
    });
    render();
  }));
  render();
  return t;
}

function header(title, sub) {
  document.title = title;
  el("h1", {}, document.body).textContent = title;
  el("p", { class: "sub" }, document.body).textContent = sub;
}

function nav(sections) {
  const n = el("nav", {}, document.body);
  for (const [id, title] of sections) el("a", { href: "#" + id }, n).textContent = title;
  return n;
}

function section(id, title) {
  const s = el("section", { id }, document.body);
  el("h2", {}, s).textContent = title;
  return s;
}

window.addEventListener("DOMContentLoaded", () => {
  const t0 = performance.now();
  const D = JSON.parse(document.getElementById("report-data").textContent);
  if (D.kind === "sweep") buildSweepPage(D); else buildRunPage(D);
  document.body.dataset.ready = "1";
  document.body.dataset.buildMs = (performance.now() - t0).toFixed(0);  /* what drawing the page took */
});
