/* run.js: the page of one run (scripts/report RUN.h5): attention explorer, head tables, loss
 * curves, scores over training; the head study's sections come from study.js, the step control
 * the explorer, the head tables and the composition follow from steps.js.
 * Reads the JSON that python/heads/report/report_run.py made (embedded in the page as #report-data);
 * uses chart.js and common.js. Knows nothing of HDF5. */
"use strict";

let PATTERNS = [];  /* the pattern names, in the harness's order: D.patterns (report_run.py) */

/* ---- attention maps: decoded once, read by index ---------------------------------------- */

function decodeMaps(m) {
  const bin = atob(m.data);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const [S, L, H, P, T] = m.shape;
  const tri = T * (T + 1) / 2;
  const values = m.encoding === "u8" ? bytes : new Float32Array(bytes.buffer);
  const scale = m.encoding === "u8" ? 1 / m.levels : 1;
  return {
    S, L, H, P, T, tri,
    /* weight of query i to key j (0 above the diagonal: masked) */
    get(s, l, h, p, i, j) {
      if (j > i) return 0;
      return values[((((s * L + l) * H + h) * P + p) * tri) + i * (i + 1) / 2 + j] * scale;
    },
  };
}

/* the class of a head at score snapshot si: the final model's or a weight snapshot's class where
 * the file stores it (steps.js), else the pattern above 0.5 (the highest), else mixed */
function classAt(D, si, l, h) {
  const S = studyAt(D, si);
  if (S && S.classes.length) return S.classes[l][h];
  let best = "mixed", bv = 0.5;
  for (const p of PATTERNS) {
    const v = D.scores[p] ? D.scores[p][si][l][h] : null;
    if (v !== null && v > bv) { best = p; bv = v; }
  }
  return best;
}

function topScore(D, si, l, h) {
  const c = classAt(D, si, l, h);
  if (D.scores[c]) return [c, D.scores[c][si][l][h]];
  let best = null, bv = -1;
  for (const p of PATTERNS) if (D.scores[p] && D.scores[p][si][l][h] > bv) { best = p; bv = D.scores[p][si][l][h]; }
  return [best, bv];
}

/* ---- the explorer ------------------------------------------------------------------------ */

/* the T x T image of one map (one pixel per cell), cached for the last few maps drawn */
const IMAGES = new Map();
function mapImage(maps, s, l, h, p) {
  const key = `${s},${l},${h},${p}`;
  if (IMAGES.has(key)) return IMAGES.get(key);
  const T = maps.T;
  const off = document.createElement("canvas");
  off.width = T; off.height = T;
  const ctx = off.getContext("2d");
  const img = ctx.createImageData(T, T);
  for (let i = 0; i < T; i++)
    for (let j = 0; j < T; j++) {
      const o = (i * T + j) * 4;
      const c = j > i ? MASKED : colour(maps.get(s, l, h, p, i, j));
      img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
    }
  ctx.putImageData(img, 0, 0);
  if (IMAGES.size > 256) IMAGES.delete(IMAGES.keys().next().value);
  IMAGES.set(key, off);
  return off;
}

function drawMap(canvas, maps, s, l, h, p, cell, focus, mode) {
  const T = maps.T;
  if (canvas.width !== T * cell) { canvas.width = T * cell; canvas.height = T * cell; }
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(mapImage(maps, s, l, h, p), 0, 0, T * cell, T * cell);
  if (focus !== null && focus !== undefined) {
    ctx.strokeStyle = "#ff7f0e";
    ctx.lineWidth = Math.max(1.5, cell / 4);
    if (mode === "from") ctx.strokeRect(0.5, focus * cell + 0.5, T * cell - 1, cell - 1);
    else ctx.strokeRect(focus * cell + 0.5, 0.5, cell - 1, T * cell - 1);
  }
}

function buildExplorer(D, root) {
  const maps = decodeMaps(D.maps);
  const st = { layer: maps.L - 1, head: 0, probe: 0, snap: maps.S - 1, step: null, focus: null, pinned: false,
               mode: "from" };
  /* the head with the highest top score in the last layer is the one shown first */
  let best = -1;
  for (let h = 0; h < maps.H; h++) {
    const [, v] = topScore(D, D.maps.snapshots[st.snap], st.layer, h);
    if (v > best) { best = v; st.head = h; }
  }
  const controls = el("div", { class: "controls" }, root);
  const mkSelect = (id, label, options, value) => {
    const lab = el("label", {}, controls, label + " ");
    const sel = el("select", { id }, lab);
    options.forEach(([v, t]) => el("option", { value: v }, sel, t));
    sel.value = String(value);
    return sel;
  };
  const range = n => Array.from({ length: n }, (_, i) => i);
  const selLayer = mkSelect("sel-layer", "layer", range(maps.L).map(i => [i, String(i)]), st.layer);
  const selHead = mkSelect("sel-head", "head", range(maps.H).map(i => [i, String(i)]), st.head);
  const selProbe = mkSelect("sel-probe", "probe", range(maps.P).map(i => [i, String(i)]), st.probe);
  const modeBtn = el("button", { id: "mode", class: "toggle", "aria-pressed": "false", type: "button",
                                  title: "switch between the attention a token pays and the attention it receives" },
                     controls, "showing: what the token attends to");
  el("span", { class: "colorbar" }, controls,
     `<span>0</span><span class="bar" style="background:${GRADIENT_CSS}"></span><span>1 attention weight</span>`);

  const probeLine = el("p", { class: "note", id: "probe-text" }, root);
  const strip = el("div", { id: "tokens" }, root);
  const row = el("div", { class: "explorer" }, root);
  const big = el("div", { class: "bigmap" }, row);
  const caption = el("div", { class: "note", id: "map-title" }, big);
  const cell = Math.max(4, Math.min(14, Math.floor(440 / maps.T)));
  /* the map with the probe's tokens on both axes (every k-th when the cells are small) */
  const mapGrid = el("div", { class: "mapgrid" }, big);
  el("div", {}, mapGrid);
  const xLabels = el("div", { class: "xlabels", id: "map-xlabels", style: `width:${maps.T * cell}px` }, mapGrid);
  const yLabels = el("div", { class: "ylabels", id: "map-ylabels", style: `height:${maps.T * cell}px` }, mapGrid);
  const canvas = el("canvas", { id: "map" }, mapGrid);
  el("div", { class: "note" }, big, "rows: query (top = first); columns: key; grey: masked (future)");
  const readout = el("div", { class: "readout", id: "readout" }, row);
  el("h3", {}, root, "Every head of the layer (one colour scale, 0 to 1; click a head to select it)");
  const multiples = el("div", { class: "multiples", id: "multiples" }, root);

  const small = Math.max(2, Math.min(5, Math.floor(150 / maps.T)));

  function weights(i) {
    /* the focused token's row (what it attends to) or column (what attends to it) */
    const out = [];
    for (let j = 0; j < maps.T; j++)
      out.push(st.mode === "from" ? (j <= i ? maps.get(st.snap, st.layer, st.head, st.probe, i, j) : null)
                                  : (j >= i ? maps.get(st.snap, st.layer, st.head, st.probe, j, i) : null));
    return out;
  }

  function renderAxes(labels, marked) {
    /* rows: every k-th, and every one of the task's marked queries (its loss rows) */
    const every = Math.ceil(10 / cell), font = Math.min(11, every * cell - 2);
    const rowShown = j => j % every === 0 || (marked && marked[j] === 1);
    xLabels.replaceChildren(); yLabels.replaceChildren();
    labels.forEach((t, j) => {
      if (!(j % every))
        el("span", { style: `left:${j * cell}px;width:${every * cell}px;font-size:${font}px`, "data-pos": j }, xLabels).textContent = t;
      if (rowShown(j))
        el("span", { style: `top:${j * cell}px;height:${every * cell}px;line-height:${cell}px;font-size:${font}px`, "data-pos": j }, yLabels).textContent = t;
    });
  }

  function renderStrip() {
    const pr = D.probes[st.probe];
    renderAxes(pr.labels, pr.marked);
    strip.replaceChildren();
    probeLine.textContent = (pr.text ? `probe ${st.probe}: "${pr.text}" — ` : `probe ${st.probe} — `) + D.token_legend;
    pr.labels.forEach((t, j) => {
      const span = el("span", { class: "tok", "data-pos": j, "data-token": pr.tokens[j],
                                title: `position ${j}, token ${pr.tokens[j]}` }, strip);
      el("span", { class: "t" }, span).textContent = t;
      el("span", { class: "i" }, span).textContent = j;
      span.addEventListener("mouseenter", () => { if (!st.pinned) setFocus(j); });
      span.addEventListener("click", () => {
        if (st.pinned && st.focus === j) { st.pinned = false; } else { st.pinned = true; setFocus(j); }
        renderFocus();
      });
    });
  }

  function renderFocus() {
    const spans = strip.querySelectorAll(".tok");
    const w = st.focus === null ? null : weights(st.focus);
    spans.forEach((span, j) => {
      span.classList.toggle("focus", j === st.focus);
      span.classList.toggle("pinned", st.pinned && j === st.focus);
      if (w === null) {
        span.style.background = ""; span.classList.remove("future"); span.removeAttribute("data-weight");
        return;
      }
      const v = w[j];
      span.classList.toggle("future", v === null);
      if (v === null) { span.style.background = ""; span.removeAttribute("data-weight"); return; }
      const c = colour(v);
      span.style.background = `rgb(${c[0]},${c[1]},${c[2]})`;
      span.style.color = v > 0.55 ? "white" : "";
      span.dataset.weight = v.toFixed(4);
    });
    canvas.dataset.focus = st.focus === null ? "" : st.focus;
    canvas.dataset.mode = st.mode;
    drawMap(canvas, maps, st.snap, st.layer, st.head, st.probe, cell, st.focus, st.mode);
    readout.replaceChildren();
    if (w === null) {
      el("p", { class: "note" }, readout, "Hover over a token (or a row of the map) to see its attention; click to pin it.");
      return;
    }
    const pr = D.probes[st.probe];
    el("h3", {}, readout, st.mode === "from"
       ? `query ${st.focus} “${pr.labels[st.focus]}” attends to`
       : `key ${st.focus} “${pr.labels[st.focus]}” receives attention from`);
    const ranked = w.map((v, j) => [v, j]).filter(x => x[0] !== null).sort((a, b) => b[0] - a[0]).slice(0, 8);
    const t = el("table", { id: "focus-top" }, readout);
    for (const [v, j] of ranked)
      el("tr", {}, t, `<td>${j}</td><td>“${escapeHtml(pr.labels[j])}”</td><td>${v.toFixed(3)}</td>`);
    const sum = w.reduce((a, v) => a + (v || 0), 0);
    el("p", { class: "note" }, readout, `${st.mode === "from" ? "row" : "column"} sum ${sum.toFixed(3)}; ` +
       `values to ±${D.maps.encoding === "u8" ? "0.002 (8-bit)" : "float32"}`);
  }

  function setFocus(j) {
    st.focus = j;
    renderFocus();
  }

  function renderMain() {
    const si = D.maps.snapshots[st.snap];
    const [c, v] = topScore(D, si, st.layer, st.head);
    caption.textContent = `layer ${st.layer}, head ${st.head}, probe ${st.probe}, step ${D.score_steps[si]}: ` +
      `${classAt(D, si, st.layer, st.head)} (top score ${c} ${v.toFixed(2)})` +
      (st.step !== null && st.step !== si ? ` (step ${D.score_steps[st.step]}'s maps were left out of this page)` : "");
    canvas.dataset.layer = st.layer; canvas.dataset.head = st.head;
    canvas.dataset.probe = st.probe; canvas.dataset.step = D.score_steps[si];
    renderFocus();
  }

  function renderMultiples() {
    multiples.replaceChildren();
    const si = D.maps.snapshots[st.snap];
    for (let h = 0; h < maps.H; h++) {
      const fig = el("figure", { "data-head": h, class: h === st.head ? "selected" : "" }, multiples);
      const cv = el("canvas", {}, fig);
      drawMap(cv, maps, st.snap, st.layer, h, st.probe, small, null, st.mode);
      const [c, v] = topScore(D, si, st.layer, h);
      el("figcaption", {}, fig, `head ${h}: <b>${escapeHtml(classAt(D, si, st.layer, h))}</b> ${escapeHtml(c)} ${v.toFixed(2)}`);
      fig.addEventListener("click", () => { st.head = h; selHead.value = String(h); renderHead(); });
    }
  }

  function renderHead() {  /* another head of the same layer: the multiples stay */
    multiples.querySelectorAll("figure").forEach(f => f.classList.toggle("selected", +f.dataset.head === st.head));
    renderMain();
  }

  function renderAll() { renderMain(); renderMultiples(); }

  canvas.addEventListener("mousemove", ev => {
    if (st.pinned) return;
    const r = canvas.getBoundingClientRect();
    const pos = Math.floor((st.mode === "from" ? ev.clientY - r.top : ev.clientX - r.left) / r.height * maps.T);
    if (pos >= 0 && pos < maps.T && pos !== st.focus) setFocus(pos);
  });
  selLayer.addEventListener("change", () => { st.layer = +selLayer.value; renderAll(); });
  selHead.addEventListener("change", () => { st.head = +selHead.value; renderHead(); });
  selProbe.addEventListener("change", () => { st.probe = +selProbe.value; renderStrip(); renderAll(); });
  modeBtn.addEventListener("click", () => {
    st.mode = st.mode === "from" ? "to" : "from";
    modeBtn.setAttribute("aria-pressed", st.mode === "to" ? "true" : "false");
    modeBtn.textContent = st.mode === "from" ? "showing: what the token attends to"
                                             : "showing: the attention the token receives";
    renderAll();
  });
  renderStrip();
  renderAll();
  return {  /* the step control's (steps.js): show step si, or the last kept map before it */
    setStep(si) {
      st.step = si;
      st.snap = Math.max(0, D.maps.snapshots.filter(x => x <= si).length - 1);
      renderAll();
    },
  };
}

/* ---- tables -------------------------------------------------------------------------------- */

/* the head table and grids at score-step index si (the step control's, steps.js): the final
 * model's or a weight snapshot's study; at a step with scores only, its scores and – elsewhere */
function buildHeadTables(D, root, si) {
  const L = D.classes.length || (D.scores.prev ? D.scores.prev[0].length : 0);
  if (!L) { el("p", { class: "note" }, root, "This file has no per-head results."); return; }
  const H = D.classes.length ? D.classes[0].length : D.scores.prev[0][0].length;
  const S = studyAt(D, si) || { classes: [], marked: [], heads: {} };
  const heads = Object.assign({}, D.heads, S.heads);  /* every column the final model has, at any step */
  const value = (k, l, h) => S.heads[k] ? S.heads[k].values[l][h] : null;
  const cols = [["layer", "layer"], ["head", "head"], ["class", "class"]];
  if (D.marked && D.marked.length) cols.push(["marked", "at marked rows"]);
  for (const p of PATTERNS) if (D.scores[p]) cols.push([p, p]);
  for (const k in heads) cols.push([k, heads[k].title]);
  const rows = [];
  for (let l = 0; l < L; l++)
    for (let h = 0; h < H; h++) {
      const r = { layer: l, head: h, class: classAt(D, si, l, h) };
      if (D.marked && D.marked.length) r.marked = S.marked.length ? S.marked[l][h] : null;
      for (const p of PATTERNS) if (D.scores[p]) r[p] = D.scores[p][si][l][h];
      for (const k in heads) r[k] = value(k, l, h);
      rows.push(r);
    }
  el("p", { class: "note", id: "head-step", "data-step": D.score_steps[si] }, root, escapeHtml(stepText(D, si)) +
     (D.steps_missing ? ` <span id="steps-missing">${escapeHtml(D.steps_missing)}</span>` : ""));
  el("p", { class: "note" }, root, `One row per head; click a column title to sort. Pattern scores at step ${D.score_steps[si]}. ` +
     (D.marked && D.marked.length ? "At marked rows: the top score over only the queries where the task takes its loss " +
      "(two_source: the '=' rows; induction: the repeats), 'k back' the key k positions back; class holds over every query. " : "") +
     Object.values(heads).map(m => `${m.title}: ${m.meaning}.`).join(" "));
  const colMax = {};  /* Δloss and importance columns are tinted on their own scales */
  for (const k in heads) colMax[k] = Math.max(...rows.map(r => Math.abs(r[k] || 0)));
  sortableTable(root, "head-table", cols, rows, (k, v) => typeof v === "number" ? fmtNum(v) : v === null ? "–" : v,
                (k, v) => (PATTERNS.includes(k) && typeof v === "number") ? tint(v, 1)
                  : k in heads ? tint(v, colMax[k])
                  : k === "class" ? `border-left: 6px solid ${CLASS_COLOURS[v] || "#999"}` : "");
  el("h3", {}, root, "Layer × head grids");
  const grids = el("div", { class: "grids" }, root);
  const metrics = PATTERNS.filter(p => D.scores[p]).map(p => [p, p, l => D.scores[p][si][l]])
    .concat(Object.keys(heads).map(k => [k, heads[k].title, l => Array.from({ length: H }, (_, h) => value(k, l, h))]));
  for (const [key, title, rowOf] of metrics) {
    const box = el("div", {}, grids);
    el("div", { class: "note" }, box, title);
    const t = el("table", { class: "data grid", id: `grid-${key}` }, box);
    el("tr", {}, t, "<th>layer</th>" + Array.from({ length: H }, (_, h) => `<th>${h}</th>`).join(""));
    let vmax = 0;
    for (let l = 0; l < L; l++) for (const v of rowOf(l)) if (v !== null) vmax = Math.max(vmax, Math.abs(v));
    for (let l = 0; l < L; l++)
      el("tr", {}, t, `<th>${l}</th>` + rowOf(l).map(v => `<td style="${tint(v, PATTERNS.includes(key) ? 1 : vmax)}">${fmtNum(v)}</td>`).join(""));
  }
}

/* ---- curves ------------------------------------------------------------------------------- */

function buildLoss(D, root) {
  const tr = D.train.step.map((s, i) => [s, D.train.loss[i]]);
  const ev = D.eval.step.map((s, i) => [s, D.eval.loss[i]]);
  const all = tr.concat(ev).map(p => p[1]).filter(v => v !== null && v > 0);
  const logy = all.length > 0 && Math.max(...all) / Math.min(...all) > 3;
  const vlines = [];
  const names = { induction: "induction heads form", prev: "previous-token heads form",
                  duplicate: "duplicate-token heads form", first: "first-token heads form", self: "self heads form" };
  const colours = { induction: "#d62728", prev: "#1f77b4", duplicate: "#9467bd", first: "#ff7f0e", self: "#2ca02c" };
  for (const p in D.formation) vlines.push({ x: D.formation[p].step, label: `${names[p]} (between step ${D.formation[p].after} and ${D.formation[p].step})`, color: colours[p] });
  const series = [{ name: "train (each logged step)", points: tr, color: "#7fa7d1", width: 1 },
                  { name: "validation (periodic: the same windows each time)", points: ev, color: "#d62728", width: 2, marker: 2.5 }];
  const svg = lineChart(root, series, { width: 900, height: 340, logy, xlabel: "training step",
                                        ylabel: "cross-entropy loss" + (logy ? " (log scale)" : ""), vlines });
  svg.id = "loss-chart";
  chartLegend(root, svg, series);
  const txt = Object.keys(D.formation).length
    ? "Dashed lines: the first stored step at which a head's score reached 0.5 (the classification threshold) having been below it at the first; it formed after the stored step before: " +
      Object.entries(D.formation).map(([p, f]) => `${p}: ${f.heads.map(x => `L${x[0]}H${x[1]} between ${x[2]} and ${x[3]}`).join(", ")}`).join("; ") + "."
    : (D.score_steps.length < 2 ? "Only one attention snapshot: set output.attn_every to see when heads form."
                                : "No head's score crossed 0.5 during training, so no formation step is marked.");
  el("p", { class: "note", id: "formation-note" }, root, txt);
  el("p", { class: "note", id: "heldout-note" }, root, heldoutText(D));
}

/* What each held-out figure covers: the periodic curve's windows, then each split's final loss. */
function heldoutText(D) {
  const n = D.eval.tokens.length ? D.eval.tokens[D.eval.tokens.length - 1] : null;
  const parts = [n !== null ? `The validation curve scores ${n.toLocaleString("en")} tokens at every evaluation (output.eval_batches).`
                            : "This file does not say how many tokens each evaluation scored (format before 1.5)."];
  const splits = Object.entries(D.heldout || {});
  if (!splits.length) parts.push("No end-of-training held-out figures (/heldout): an older format, or an incomplete run.");
  for (const [name, h] of splits)
    parts.push(`Final held-out loss, ${name} split: ${h.loss.toFixed(4)} nats per token over ` +
               `${h.windows === h.split_windows ? "all " : ""}${h.windows} of its ${h.split_windows} windows ` +
               `(${h.tokens.toLocaleString("en")} tokens).`);
  if (splits.length === 1) parts.push("No test split.");
  return parts.join(" ");
}

function buildScoresOverSteps(D, root) {
  if (D.score_steps.length < 2) { el("p", { class: "note" }, root, "Only one snapshot: nothing to follow over training."); return; }
  const controls = el("div", { class: "controls" }, root);
  const lab = el("label", {}, controls, "pattern ");
  const sel = el("select", { id: "sel-pattern" }, lab);
  const pats = PATTERNS.filter(p => D.scores[p]);
  pats.forEach(p => el("option", { value: p }, sel, p));
  sel.value = D.scores.induction ? "induction" : pats[0];
  const box = el("div", { class: "grids" }, root);
  function draw() {
    box.replaceChildren();
    const s = D.scores[sel.value];
    const L = s[0].length, H = s[0][0].length;
    for (let l = 0; l < L; l++) {
      const panel = el("div", { style: "max-width: 450px" }, box);
      el("div", { class: "note" }, panel, `layer ${l}: ${sel.value} score of each head (thick: heads whose final class is ${sel.value}; click a name to hide it)`);
      const series = [];
      for (let h = 0; h < H; h++)
        series.push({ name: `h${h}` + (D.classes.length ? ` ${D.classes[l][h]}` : ""), color: headColour(h, H),
                      width: D.classes.length && D.classes[l][h] === sel.value ? 3 : 1.3,  /* the pattern's own heads thick */
                      points: D.score_steps.map((st, i) => [st, s[i][l][h]]) });
      const svg = lineChart(panel, series, { width: 430, height: 260, ymin: 0, ymax: 1,
                                              xlabel: "training step", ylabel: "score", hlines: [{ y: 0.5 }] });
      chartLegend(panel, svg, series);
    }
  }
  sel.addEventListener("change", draw);
  draw();
}

function buildRunPage(D) {
  PATTERNS = D.patterns;
  const c = D.config;
  header(D.name, `${c.task || "?"} task, d_model ${c.d_model}, ${plural(c.n_head, "head")} of ${c.d_head}` +
         (c.n_kv_head && c.n_kv_head !== c.n_head ? ` (${plural(c.n_kv_head, "K/V head")})` : "") +
         `, ${plural(c.n_layer, "layer")}, pos ${c.pos || "learned"}` + (c.output_gate ? ", output gate" : "") +
         (c.sink ? ", attention sink" : "") + `, ${c.steps} steps, seed ${c.seed}; status ${D.status}` +
         (D.created ? `; written ${D.created}` : ""));
  const sections = [["explorer", "Attention explorer"], ["heads", "Heads"], ["loss", "Loss"],
                    ["scores", "Scores over training"]];
  if (D.prune) sections.push(["pruning", "Pruning curves"]);
  if (D.circuits || Object.values(D.studies).some(s => s.circuits)) sections.push(["composition", "Composition"]);
  sections.push(["causal", "Causal"]);
  sections.push(["config", "Config"]);
  const menu = nav(sections);
  const sec = {};
  for (const [id, title] of sections) sec[id] = section(id, title);
  const last = D.score_steps.length - 1;
  if (last > 0)  /* the sections the step control leaves as they are */
    for (const id of ["pruning", "causal"]) if (sec[id])
      el("p", { class: "note step-fixed" }, sec[id], `The final model's (step ${D.score_steps[last]}), whichever step the step control shows.`);
  let explorer = null;
  const headsBox = el("div", { id: "heads-at-step" }, sec.heads), compBox = el("div", {}, sec.composition || null);
  if (D.maps) {
    el("p", { class: "note", id: "precision" }, sec.explorer,
       D.maps.encoding === "u8"
         ? `Precision: attention weights are stored in this page as 8-bit levels round(255·p)/255, within ${(D.maps.max_error).toFixed(4)} (≤ 1/510) of the file's float32 values; shown to 4 decimals.`
         : "Precision: attention weights are stored in this page as float32, as in the file.");
    if (D.maps.dropped_snapshots)
      el("p", { class: "note" }, sec.explorer, `${D.maps.dropped_snapshots} of ${D.maps.dropped_snapshots + D.maps.shape[0]} steps' maps left out to keep the page small (evenly spaced ones and the last are kept).`);
    explorer = buildExplorer(D, sec.explorer);
  } else el("p", { class: "note" }, sec.explorer, "This file has no attention maps (/attn/maps).");
  buildHeadTables(D, headsBox, last);
  buildLoss(D, sec.loss);
  buildScoresOverSteps(D, sec.scores);
  if (D.prune) buildPruning(D, sec.pruning);
  if (sec.composition) buildCompositionAt(D, compBox, last);
  if (D.score_steps.length > 1)
    buildStepControl(D, menu, si => {
      if (explorer) explorer.setStep(si);
      headsBox.replaceChildren();
      buildHeadTables(D, headsBox, si);
      if (sec.composition) buildCompositionAt(D, compBox, si);
    });
  buildCausal(D, sec.causal);
  el("pre", { class: "config" }, sec.config).textContent = D.config_yaml;
}
