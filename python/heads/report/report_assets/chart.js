/* chart.js: the report's one chart kind, an SVG x-y plot (lines, points, error bars, vertical
 * markers, linear or log axes). Plain SVG: the charts are few and small, and a vendored
 * charting library would be larger than everything else in the page's code together.
 * Knows nothing of results files: it gets series of [x, y] points. */
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, parent) {
  const el = document.createElementNS(SVGNS, name);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(el);
  return el;
}

/* Ticks at 1, 2, 5 x 10^k covering [lo, hi], about n of them. */
function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { return [lo]; }
  const raw = (hi - lo) / Math.max(1, n);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

function logTicks(lo, hi) {
  const out = [];
  const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
  const mults = b - a <= 2 ? [1, 2, 5] : [1];
  for (let e = a; e <= b; e++)
    for (const m of mults) { const v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v); }
  return out.length >= 2 ? out : niceTicks(lo, hi, 4).filter(v => v > 0);
}

function fmtTick(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(0).replace("e", "·10^").replace("+", "");
  return String(+v.toPrecision(3));
}

/* lineChart(container, series, opts): series [{name, points: [[x, y]], color, width, dash,
 * marker (radius), err: [e per point] (± error bars), xerr: [e per point] (± along x), line:
 * false for points only, title}].
 * opts: {width, height, logx, logy, logbase_x, xlabel, ylabel, xticks: [[v, label]], vlines:
 * [{x, label, color}], hlines: [{y, label}], ymin, ymax, legend: true}. Returns the svg. */
function lineChart(container, series, opts) {
  const W = opts.width || 640, H = opts.height || 320;
  const m = { l: 62, r: 14, t: 14, b: 46 };
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "chart",
                             role: "img" }, container);
  if (opts.title) svgEl("title", {}, svg).textContent = opts.title;
  const xs = [], ys = [];
  for (const s of series) s.points.forEach((p, i) => {
    if (p[1] === null || !isFinite(p[1])) return;
    if (opts.logy && p[1] <= 0) return;
    const ex = s.xerr ? (s.xerr[i] || 0) : 0;
    xs.push(p[0] - ex, p[0] + ex);
    const e = s.err ? (s.err[i] || 0) : 0;
    ys.push(p[1] - e, p[1] + e);
  });
  for (const v of (opts.vlines || [])) xs.push(v.x);
  if (!xs.length) { svgEl("text", { x: 20, y: 30 }, svg).textContent = "no data"; return svg; }
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  let y0 = opts.ymin !== undefined ? opts.ymin : Math.min(...ys);
  let y1 = opts.ymax !== undefined ? opts.ymax : Math.max(...ys);
  if (opts.logy) { y0 = Math.max(y0, 1e-12); const pad = Math.pow(y1 / y0, 0.05); y0 /= pad; y1 *= pad; }
  else if (opts.ymin === undefined) { const pad = (y1 - y0) * 0.05 || Math.abs(y1) * 0.05 || 0.5; y0 -= pad; y1 += pad; }
  else if (opts.ymax === undefined) y1 += (y1 - y0) * 0.05 || 0.5;  /* the top point off the frame */
  if (opts.logx) { const pad = 1.3; x0 /= pad; x1 *= pad; }
  else if (opts.xticks) { x0 -= 0.5; x1 += 0.5; }  /* categories: room for the end labels */
  else if (x1 === x0) { x0 -= 1; x1 += 1; }
  const fx = opts.logx ? v => Math.log(v) : v => v;
  const fy = opts.logy ? v => Math.log(v) : v => v;
  const X = v => m.l + (fx(v) - fx(x0)) / (fx(x1) - fx(x0)) * (W - m.l - m.r);
  const Y = v => H - m.b - (fy(v) - fy(y0)) / (fy(y1) - fy(y0)) * (H - m.t - m.b);
  const axis = svgEl("g", { stroke: "#888", "font-size": 11, fill: "#333" }, svg);
  svgEl("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none",
                  stroke: "#bbb" }, axis);
  const yt = opts.logy ? logTicks(y0, y1) : niceTicks(y0, y1, 5);
  for (const v of yt) {
    if (v < y0 || v > y1) continue;
    svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), stroke: "#eee" }, axis);
    const t = svgEl("text", { x: m.l - 5, y: Y(v) + 4, "text-anchor": "end", stroke: "none" }, axis);
    t.textContent = fmtTick(v);
  }
  const xt = opts.xticks || (opts.logx ? logTicks(x0, x1).map(v => [v, fmtTick(v)])
                                        : niceTicks(x0, x1, 6).map(v => [v, fmtTick(v)]));
  for (const [v, label] of xt) {
    if (v < x0 || v > x1) continue;
    svgEl("line", { x1: X(v), x2: X(v), y1: H - m.b, y2: H - m.b + 4 }, axis);
    const t = svgEl("text", { x: X(v), y: H - m.b + 16, "text-anchor": "middle", stroke: "none" }, axis);
    t.textContent = label;
  }
  if (opts.xlabel) svgEl("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle",
                                   stroke: "none" }, axis).textContent = opts.xlabel;
  if (opts.ylabel) svgEl("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", stroke: "none",
                                   transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, axis).textContent = opts.ylabel;
  for (const h of (opts.hlines || [])) {
    if (h.y < y0 || h.y > y1) continue;
    svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(h.y), y2: Y(h.y), stroke: "#777",
                    "stroke-dasharray": "4 3" }, svg);
  }
  (opts.vlines || []).forEach((v, k) => {
    const g = svgEl("g", { class: "marker", "data-step": v.x }, svg);
    svgEl("line", { x1: X(v.x), x2: X(v.x), y1: m.t, y2: H - m.b, stroke: v.color || "#444",
                    "stroke-dasharray": "5 3", "stroke-width": 1.3 }, g);
    const t = svgEl("text", { x: X(v.x) + 4, y: m.t + 13 + 13 * k, "font-size": 11,
                              fill: v.color || "#444" }, g);
    t.textContent = v.label;
    /* a marker near the right edge: its label to the left of the line, inside the chart */
    if (t.getComputedTextLength && X(v.x) + 4 + t.getComputedTextLength() > W - m.r) {
      t.setAttribute("x", X(v.x) - 4);
      t.setAttribute("text-anchor", "end");
    }
  });
  /* a tick label wider than the room at an end of the axis is kept inside the chart */
  for (const t of axis.querySelectorAll("text[text-anchor='middle']:not([transform])")) {
    if (!t.getComputedTextLength) break;
    const w = t.getComputedTextLength(), x = +t.getAttribute("x");
    if (x + w / 2 > W - 1) t.setAttribute("x", W - 1 - w / 2);
    if (x - w / 2 < 1) t.setAttribute("x", 1 + w / 2);
  }
  const plot = svgEl("g", {}, svg);
  for (const s of series) {
    const g = svgEl("g", { class: "series", "data-name": s.name || "" }, plot);
    if (s.title || s.name) svgEl("title", {}, g).textContent = s.title || s.name;
    const pts = s.points.filter(p => p[1] !== null && isFinite(p[1]) && (!opts.logy || p[1] > 0));
    if (s.line !== false && pts.length > 1)
      svgEl("polyline", { points: pts.map(p => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" "),
                          fill: "none", stroke: s.color, "stroke-width": s.width || 1.5,
                          "stroke-dasharray": s.dash || "none" }, g);
    if (s.err) s.points.forEach((p, i) => {
      const e = s.err[i];
      if (!e || p[1] === null) return;
      const lo = Math.max(p[1] - e, y0), hi = Math.min(p[1] + e, y1);  /* clipped to the axes */
      svgEl("line", { x1: X(p[0]), x2: X(p[0]), y1: Y(lo), y2: Y(hi), stroke: s.color,
                      "stroke-width": 1.5 }, g);
      for (const yv of [lo, hi])
        svgEl("line", { x1: X(p[0]) - 5, x2: X(p[0]) + 5, y1: Y(yv), y2: Y(yv), stroke: s.color }, g);
    });
    if (s.xerr) s.points.forEach((p, i) => {
      const e = s.xerr[i];
      if (!e || p[1] === null) return;
      svgEl("line", { x1: X(p[0] - e), x2: X(p[0] + e), y1: Y(p[1]), y2: Y(p[1]), stroke: s.color,
                      "stroke-width": 1.5 }, g);
      for (const xv of [p[0] - e, p[0] + e])
        svgEl("line", { x1: X(xv), x2: X(xv), y1: Y(p[1]) - 5, y2: Y(p[1]) + 5, stroke: s.color }, g);
    });
    if (s.marker || pts.length === 1)
      for (const p of pts) {
        const c = svgEl("circle", { cx: X(p[0]), cy: Y(p[1]), r: s.marker || 2.5,
                                    fill: s.hollow ? "white" : s.color, stroke: s.color }, g);
        svgEl("title", {}, c).textContent = `${s.name ? s.name + ": " : ""}${p[0]}, ${(+p[1]).toPrecision(4)}`;
      }
  }
  return svg;
}

/* A legend under a chart; clicking an entry hides or shows its series. */
function chartLegend(container, svg, series) {
  const box = document.createElement("div");
  box.className = "legend";
  for (const s of series) {
    if (!s.name || s.nolegend) continue;
    const item = document.createElement("span");
    item.className = "item";
    setMarkup(item, s.line === false  /* points only: a dot, hollow or filled, as drawn */
      ? `<span class="dot" style="border-color:${s.color};background:${s.hollow ? "white" : s.color}"></span>`
      : `<span class="sw" style="background:${s.color}"></span>`);
    item.appendChild(document.createTextNode(s.name));
    item.addEventListener("click", () => {
      item.classList.toggle("dim");
      for (const g of svg.querySelectorAll("g.series"))
        if (g.dataset.name === s.name) g.style.display = item.classList.contains("dim") ? "none" : "";
    });
    box.appendChild(item);
  }
  container.appendChild(box);
  return box;
}
