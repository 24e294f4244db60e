/* study.js: the head study on a run's page (scripts/report RUN.h5), when the file has it: the
 * pruning curves (/prune: both criteria, heads needed within the tolerance, the heads removed at
 * each step, one head per layer) and the composition scores (/circuits: Q-, K-, V-composition
 * of every earlier -> later head pair against the random baseline, previous-token and induction
 * heads labelled). Reads D.prune and D.circuits of python/heads/report/report_study.py; uses chart.js
 * and common.js. Knows nothing of HDF5. */
"use strict";

const CLASS_TAGS = { prev: "prev", induction: "ind" };  /* the classes a circuit is read by */

/* "L1H7 ind": a head, with its class when it is a previous-token or induction head */
function headName(D, l, h) {
  const c = D.classes.length ? D.classes[l][h] : "";
  return `L${l}H${h}` + (CLASS_TAGS[c] ? " " + CLASS_TAGS[c] : "");
}

/* a head as a chip coloured by its class (the class's colour, bold for prev / induction) */
function headChip(D, l, h, parent) {
  const c = D.classes.length ? D.classes[l][h] : "mixed";
  const chip = el("span", { class: "chip" + (CLASS_TAGS[c] ? " key" : ""), "data-layer": l, "data-head": h,
                            style: `border-color:${CLASS_COLOURS[c] || "#999"}`, title: `layer ${l}, head ${h}: ${c}` }, parent);
  chip.textContent = headName(D, l, h);
  return chip;
}

function buildPruning(D, root) {
  const P = D.prune, crit = Object.keys(P.criteria);
  const total = P.criteria[crit[0]].heads_left[0];
  el("p", { class: "note" }, root,
     `Michel, Levy &amp; Neubig (2019): from the whole model, heads are removed (gate 0) a few at a time, ` +
     `the lowest-scoring of those left first, and the scores measured again on the pruned model after every step; ` +
     `the held-out loss at each point. Heads needed: the fewest heads left whose loss (and every earlier point's) ` +
     `is within ${escapeHtml(P.tolerance_text)} of the unpruned loss ${fmtNum(P.unpruned)}.`);
  if (P.warning) el("p", { class: "note warning" }, root, "Warning: " + escapeHtml(P.warning) + ".");
  const summary = el("ul", { id: "prune-needed" }, root);
  for (const c of crit)
    el("li", { "data-criterion": c, "data-needed": P.criteria[c].heads_needed }, summary,
       `${escapeHtml(P.criteria[c].title)}: <b>${P.criteria[c].heads_needed} of ${total}</b> heads needed ` +
       `(${Math.round(100 * (1 - P.criteria[c].heads_needed / total))}% prunable)`);
  const colours = { importance: "#1f77b4", delta_loss: "#d62728" };
  const series = crit.map(c => ({ name: P.criteria[c].title, color: colours[c] || "#444", width: 2, marker: 3,
                                  points: P.criteria[c].heads_left.map((left, i) => [total - left, P.criteria[c].eval_loss[i]]) }));
  const all = series.flatMap(s => s.points.map(p => p[1])).filter(v => v !== null && v > 0);
  const logy = all.length > 0 && Math.max(...all) / Math.min(...all) > 3;
  const svg = lineChart(root, series, { width: 760, height: 320, logy, xlabel: `heads removed (of ${total}, all layers)`,
                                        ylabel: "held-out eval loss" + (logy ? " (log scale)" : ""),
                                        hlines: [{ y: P.limit }] });
  svg.id = "prune-chart";
  chartLegend(root, svg, series);
  el("p", { class: "note" }, root, `Dashed: the unpruned loss + ${escapeHtml(P.tolerance_text)} (the heads-needed tolerance).`);
  /* the curves as a table, with the heads each step removed */
  const t = el("table", { class: "data", id: "prune-table" }, root);
  el("tr", {}, t, "<th>heads left</th>" + crit.map(c => `<th data-criterion="${c}">eval loss: ${escapeHtml(P.criteria[c].title)}</th><th class="l">removed at this step</th>`).join(""));
  const n = Math.max(...crit.map(c => P.criteria[c].heads_left.length));
  for (let i = 0; i < n; i++) {
    const tr = el("tr", { "data-point": i }, t);
    el("td", {}, tr).textContent = P.criteria[crit[0]].heads_left[i];
    for (const c of crit) {
      const C = P.criteria[c], v = C.eval_loss[i];
      const td = el("td", { "data-criterion": c, "data-value": v === undefined || v === null ? "" : v }, tr);
      td.textContent = v === undefined ? "" : fmtNum(v);
      const within = v !== null && v !== undefined && v <= P.limit;
      if (!within && v !== undefined) td.classList.add("over");
      const chips = el("td", { class: "l chips", "data-criterion": c }, tr);
      if (i === 0 || i >= C.heads_left.length) continue;
      for (const [l, h] of C.order.slice(total - C.heads_left[i - 1], total - C.heads_left[i])) headChip(D, l, h, chips);
    }
  }
  el("p", { class: "note" }, root, "Losses over the threshold in red. Heads: L = layer, H = head; " +
     "coloured by class, prev / ind = previous-token / induction heads.");
  if (P.one_head) buildOneHead(D, P.one_head, root);
}

function buildOneHead(D, O, root) {
  el("h3", {}, root, "One head per layer (Michel et al.: a layer reduced to one head)");
  el("p", { class: "note" }, root, "For each layer, every head kept alone (the layer's other heads ablated, " +
     "the other layers whole): Δloss on the ranking batches (output.prune_batches); the best head's Δloss " +
     "measured again on all held-out batches.");
  const H = O.delta_loss[0].length;
  const t = el("table", { class: "data", id: "one-head-table" }, el("div", { class: "scroll" }, root));
  el("tr", {}, t, "<th>layer</th><th class='l'>best head</th><th>its Δloss (all batches)</th>" +
     Array.from({ length: H }, (_, h) => `<th>h${h} alone</th>`).join(""));
  let vmax = 0;
  for (const row of O.delta_loss) for (const v of row) if (v !== null) vmax = Math.max(vmax, Math.abs(v));
  O.best_head.forEach((b, l) => {
    const tr = el("tr", { "data-layer": l }, t);
    el("td", {}, tr).textContent = l;
    headChip(D, l, b, el("td", { class: "l" }, tr));
    el("td", { "data-value": O.best_delta_loss[l] }, tr).textContent = fmtNum(O.best_delta_loss[l]);
    O.delta_loss[l].forEach((v, h) => {
      const td = el("td", { "data-value": v === null ? "" : v, style: tint(v, vmax), class: h === b ? "best" : "" }, tr);
      td.textContent = fmtNum(v);
    });
  });
}

/* the composition scores of D.circuits (one model's: steps.js passes a snapshot's), showing kind
 * (e.g. "q_composition") when it has it, else K-composition */
function buildComposition(D, root, kind) {
  const C = D.circuits;
  if (C.note) el("p", { class: "note", id: "composition-note" }, root).textContent = C.note + ".";
  const kinds = Object.keys(C.kinds);
  if (!kinds.length) return;
  el("p", { class: "note" }, root,
     "Elhage et al. (2021), as TransformerLens's all_composition_scores, LayerNorm folded: how much of what an " +
     "earlier head A writes (W_OV) a later head B reads with its queries (Q), keys (K) or values (V), as ‖product‖ / " +
     `(‖·‖‖·‖). The random baseline is the same score for Gaussian matrices of the same shapes. Scores rounded to ${C.digits} decimals. ` +
     "An induction head reads the previous-token head through K-composition.");
  const controls = el("div", { class: "controls" }, root);
  const sel = el("select", { id: "sel-composition" }, el("label", {}, controls, "score "));
  kinds.forEach(k => el("option", { value: k }, sel, `${k[0].toUpperCase()}-composition`));
  sel.value = kind && C.kinds[kind] ? kind : C.kinds.k_composition ? "k_composition" : kinds[0];
  const baseline = el("span", { class: "note", id: "composition-baseline" }, controls);
  const top = el("div", {}, root);
  const grid = el("div", { class: "scroll" }, root);
  function draw() {
    const K = C.kinds[sel.value], V = K.values;
    const L = V.length, H = V[0].length;
    baseline.textContent = `random matrices: ${fmtNum(K.random_baseline)}`;
    const pairs = [];
    for (let b = 1; b < L; b++) for (let hb = 0; hb < H; hb++)
      for (let a = 0; a < b; a++) for (let ha = 0; ha < H; ha++)
        if (V[b][hb][a][ha] !== null) pairs.push([V[b][hb][a][ha], b, hb, a, ha]);
    pairs.sort((x, y) => y[0] - x[0]);
    top.replaceChildren();
    el("h3", {}, top, `Highest ${sel.value[0].toUpperCase()}-composition pairs`);
    const t = el("table", { class: "data", id: "composition-top" }, top);
    el("tr", {}, t, "<th class='l'>later head (reads)</th><th class='l'>earlier head (writes)</th><th>score</th><th>× random</th>");
    for (const [v, b, hb, a, ha] of pairs.slice(0, 8)) {
      const tr = el("tr", { "data-later": `${b},${hb}`, "data-earlier": `${a},${ha}` }, t);
      headChip(D, b, hb, el("td", { class: "l" }, tr));
      headChip(D, a, ha, el("td", { class: "l" }, tr));
      el("td", { "data-value": v }, tr).textContent = v.toFixed(C.digits);
      el("td", {}, tr).textContent = K.random_baseline ? (v / K.random_baseline).toFixed(1) : "–";
    }
    /* the matrix: rows the later heads, columns the earlier ones */
    grid.replaceChildren();
    const rows = [], cols = [];
    for (let l = 1; l < L; l++) for (let h = 0; h < H; h++) rows.push([l, h]);
    for (let l = 0; l < L - 1; l++) for (let h = 0; h < H; h++) cols.push([l, h]);
    const vmax = Math.max(K.random_baseline || 0, ...pairs.map(p => p[0]));
    const small = cols.length > 16;
    const g = el("table", { class: "data matrix" + (small ? " small" : ""), id: "composition-grid" }, grid);
    const hr = el("tr", {}, g, "<th class='l'>later ↓ / earlier →</th>");
    for (const [l, h] of cols) headChip(D, l, h, el("th", { class: "vert" }, hr));
    for (const [b, hb] of rows) {
      const tr = el("tr", { "data-later": `${b},${hb}` }, g);
      headChip(D, b, hb, el("th", { class: "l" }, tr));
      for (const [a, ha] of cols) {
        const v = V[b][hb][a][ha];
        const td = el("td", { "data-earlier": `${a},${ha}`, "data-value": v === null ? "" : v,
                              style: v === null ? "background:#eee" : tint(v, vmax),
                              title: v === null ? "no score: not an earlier → later pair"
                                                : `${headName(D, b, hb)} ← ${headName(D, a, ha)}: ${v.toFixed(C.digits)}` }, tr);
        td.textContent = v === null ? "" : small ? "" : v.toFixed(2);
      }
    }
    el("p", { class: "note" }, grid, `Colour: the score on [0, ${fmtNum(vmax)}] (the highest pair); grey: no score ` +
       "(the earlier head is not in an earlier layer). Hover a cell for its value.");
  }
  sel.addEventListener("change", draw);
  draw();
}
