/* causal.js: the "Causal" section of a run's page (scripts/report RUN.h5): activation patching per
 * head (/patching) beside zero ablation (/heads) and K-composition (/circuits) as layer × head
 * grids, the heads that carry most of the patching effect, the other patching kinds and their AtP
 * estimates, the strongest path-patching edges as a small graph (/patching/path_*) or why there
 * are none, the direct logit attribution with all its parts (/dla), the copying scores
 * (/scores/copying), then the other patching kinds and their AtP estimates. Reads D.causal of python/heads/report/report_causal.py, D.heads and D.circuits; uses
 * common.js, chart.js (svgEl) and study.js (headName, headChip). Knows nothing of HDF5. */
"use strict";

const PATH_COLOURS = { Q: "#1f77b4", K: "#d62728", V: "#2ca02c" };

/* a grid cell's text: three decimals (0 below 0.0005 in size), the exact value in its title */
function cellNum(v) {
  if (Math.abs(v) < 5e-4) return "0";
  return Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(3);
}

/* a layer × head grid of values (null: no value), tinted on [−vmax, vmax] (red below 0) */
function causalGrid(parent, id, title, values) {
  const box = el("div", { class: "causal-grid" }, parent);
  el("div", { class: "note" }, box, title);
  let vmax = 0;
  for (const row of values) for (const v of row) if (v !== null) vmax = Math.max(vmax, Math.abs(v));
  const t = el("table", { class: "data grid", id }, box);
  el("tr", {}, t, "<th>layer</th>" + values[0].map((_, h) => `<th>${h}</th>`).join(""));
  values.forEach((row, l) => {
    const tr = el("tr", { "data-layer": l }, t, `<th>${l}</th>`);
    row.forEach((v, h) => {
      const td = el("td", { "data-head": h, "data-value": v === null ? "" : v, style: tint(v, vmax),
                            title: v === null ? "" : `layer ${l}, head ${h}: ${v}` }, tr);
      td.textContent = v === null ? "–" : cellNum(v);
    });
  });
  return box;
}

/* each later head's strongest K-composition with any earlier head (null in layer 0) */
function strongestReader(C) {
  const K = C.kinds.k_composition.values, L = K.length, H = K[0].length;
  return K.map((rows, l) => rows.map((_, h) => {
    if (l === 0) return null;
    let best = null;
    for (let a = 0; a < l; a++) for (const v of K[l][h][a]) if (v !== null && (best === null || v > best)) best = v;
    return best;
  }));
}

function buildCausal(D, root) {
  const C = D.causal;
  if (!C) {
    el("p", { class: "note", id: "causal-absent" }, root,
       "This file has no causal evidence: no activation patching (/patching), direct logit attribution (/dla) " +
       "or copying scores (/scores/copying). <code>harness patch RUN.h5</code> adds patching and the attribution; " +
       "<code>harness prune RUN.h5</code> the copying scores.");
    return;
  }
  el("p", { class: "note" }, root,
     "Which heads cause the behaviour, on real inputs: a clean and a corrupted version of each held-out sequence " +
     "(induction: the repeat re-drawn; two_source: the query's source changed; text and tokens: another held-out window). " +
     "Activation patching runs the corrupted input with one head's value taken from the clean run; its normalised effect " +
     "(m_patched − m_corrupt) / (m_clean − m_corrupt) is 1 when that head alone restores the clean behaviour, 0 when it " +
     `changes nothing. Grids show 3 decimals (hover a cell for the page's value, rounded to ${C.digits}); red: negative.`);
  const attrs = C.attrs, facts = el("ul", { id: "causal-facts" }, root);
  if (attrs.metric)
    el("li", { id: "causal-metric" }, facts, `metric: <b>${escapeHtml(attrs.metric)}</b>` +
       (attrs[`clean_${attrs.metric}`] !== undefined
          ? `, clean <span data-value="${attrs[`clean_${attrs.metric}`]}">${fmtNum(attrs[`clean_${attrs.metric}`])}</span>, ` +
            `corrupted <span data-value="${attrs[`corrupt_${attrs.metric}`]}">${fmtNum(attrs[`corrupt_${attrs.metric}`])}</span>` : "") +
       (attrs.metric === "logit_diff" ? " (the right next token's logit minus the corrupted run's next token's)" : ""));
  if (C.carrying !== null) {
    const all = C.patching.head_out.values.length * C.patching.head_out.values[0].length;
    el("li", { id: "causal-carrying", "data-value": C.carrying }, facts,
       `<b>${C.carrying} of ${all}</b> heads carry ${Math.round(100 * C.share)}% of the head-output patching effect ` +
       `(the fewest heads, by |effect| from the largest, whose |effects| sum to ${Math.round(100 * C.share)}% of all heads')`);
  }
  /* the patching grid beside ablation and composition */
  el("h3", {}, root, "Patching beside ablation and composition");
  const row = el("div", { class: "grids", id: "causal-beside" }, root);
  if (C.patching.head_out) causalGrid(row, "causal-patching", "patching effect: the head's output from the clean run", C.patching.head_out.values);
  else el("p", { class: "note" }, row, "No activation patching in this file (/patching/head_out).");
  if (D.heads.ablation_delta) causalGrid(row, "causal-ablation", "Δloss with the head's output zeroed (nats)", D.heads.ablation_delta.values);
  if (D.circuits && D.circuits.kinds.k_composition && D.circuits.kinds.k_composition.values.length > 1)
    causalGrid(row, "causal-composition", "strongest K-composition with an earlier head (weights)", strongestReader(D.circuits));
  buildPaths(D, C, root);
  buildDla(D, C, root);
  if (C.copying) {
    el("h3", {}, root, "Copying scores");
    el("p", { class: "note" }, root, "Olsson et al. (2022), as TransformerLens computes it: Re(Σλ)/Σ|λ| over the eigenvalues of the " +
       "full OV circuit W_E·W_V·W_O·W_U, LayerNorm folded: 1 for a head that copies its input token to the output, −1 for one " +
       "that suppresses it. An induction head attends to the token after an earlier copy AND copies it.");
    causalGrid(el("div", { class: "grids" }, root), "causal-copying", "copying score", C.copying);
  }
  const kinds = Object.keys(C.patching).filter(k => k !== "head_out");
  if (kinds.length || Object.keys(C.atp).length) {
    el("h3", {}, root, "Patching by kind, and the AtP estimate");
    const more = el("div", { class: "grids", id: "causal-kinds" }, root);
    for (const k of kinds) causalGrid(more, `causal-patching-${k}`, `${C.patching[k].meaning} from the clean run` +
                                      (C.patching[k].values[0].length !== (C.patching.head_out || C.patching[k]).values[0].length ? " (per K/V head)" : ""),
                                      C.patching[k].values);
    for (const k in C.atp) causalGrid(more, `causal-atp-${k}`, `AtP estimate: ${C.patching[k] ? C.patching[k].meaning : k}` +
                                      (C.atp_correlation[k] !== undefined ? ` (Pearson r ${fmtNum(C.atp_correlation[k])} with the exact effect)` : ""),
                                      C.atp[k]);
  }
}

function buildDla(D, C, root) {
  el("h3", {}, root, "Direct logit attribution");
  if (!C.dla) { el("p", { class: "note", id: "dla-absent" }, root, "No direct logit attribution in this file (/dla)."); return; }
  const A = C.dla;
  el("p", { class: "note" }, root,
     `The logit of the right next token on the clean inputs, mean over ${fmtNum(A.positions)} marked positions, split into what ` +
     "each part of the residual stream writes, read through the final LayerNorm with its scale frozen at the run's own 1/σ " +
     "and each part centred over d_model (TransformerLens's apply_ln_to_stack). The parts add up to the logit.");
  causalGrid(el("div", { class: "grids" }, root), "causal-dla", "each head's z·W_O (logit)", A.head);
  const heads = A.head.flat().reduce((s, v) => s + (v || 0), 0);
  const t = el("table", { class: "data", id: "dla-parts" }, root);
  el("tr", {}, t, "<th class='l'>part</th><th>logit</th>");
  const parts = [["embedding (token and position)", A.embed]]
    .concat(A.bias_o.map((v, l) => [`layer ${l} output bias b_o`, v]))
    .concat([["every head (sum of the grid)", heads], ["final LayerNorm bias", A.ln_bias]]);
  for (const [name, v] of parts) el("tr", {}, t, `<td class="l">${escapeHtml(name)}</td><td data-value="${v}">${fmtNum(v)}</td>`);
  el("tr", { class: "total" }, t, `<td class="l"><b>sum = the model's logit</b></td><td data-value="${A.logit}"><b>${fmtNum(A.logit)}</b></td>`);
}

/* the strongest path-patching edges: heads as nodes by layer (rows) and head (columns), an arrow
 * from each sender to its receiver, width by |effect|, colour by the input it reaches */
function buildPaths(D, C, root) {
  el("h3", {}, root, "Strongest paths (path patching)");
  if (C.paths === null) {
    el("p", { class: "note", id: "paths-absent" }, root, "Path patching is absent: this file has no /patching/path_q, " +
       "path_k or path_v. The grids above are per head; the composition scores say which head pairs could compose by their weights.");
    return;
  }
  if (!C.paths.length) { el("p", { class: "note", id: "paths-absent" }, root, "Path patching found no edge with an effect."); return; }
  el("p", { class: "note" }, root, "Each edge A → B: only that path clean (A's clean output seen by B's Q, K or V input alone), every " +
     "other path corrupted; its normalised effect. Colour: the input it reaches, <span style='color:#1f77b4'>Q</span>, " +
     "<span style='color:#d62728'>K</span> or <span style='color:#2ca02c'>V</span>; width by |effect|; dashed: negative.");
  const L = D.config.n_layer, H = D.config.n_head, cw = Math.max(28, Math.min(60, 640 / H)), rh = 90;
  const W = 60 + H * cw, Hh = 40 + (L - 1) * rh + 30;
  const svg = svgEl("svg", { width: W, height: Hh, viewBox: `0 0 ${W} ${Hh}`, id: "paths-graph" }, root);
  const pos = (l, h) => [60 + (h + 0.5) * cw, 30 + (L - 1 - l) * rh];
  const top = Math.max(...C.paths.map(p => Math.abs(p.effect)));
  for (const p of C.paths) {
    const [x1, y1] = pos(...p.earlier), [x2, y2] = pos(...p.later);
    svgEl("line", { x1, y1, x2, y2, stroke: PATH_COLOURS[p.kind], "stroke-width": 1 + 5 * Math.abs(p.effect) / top,
                    "stroke-dasharray": p.effect < 0 ? "4 3" : "", opacity: 0.8,
                    "data-edge": `${p.later}|${p.earlier}|${p.kind}` }, svg);
  }
  const used = new Set(C.paths.flatMap(p => [p.later.join(","), p.earlier.join(",")]));
  for (let l = 0; l < L; l++) {
    const label = svgEl("text", { x: 8, y: pos(l, 0)[1] + 4, "font-size": 11 }, svg);
    label.textContent = `layer ${l}`;
    for (let h = 0; h < H; h++) {
      const [x, y] = pos(l, h), on = used.has(`${l},${h}`);
      svgEl("circle", { cx: x, cy: y, r: on ? 7 : 3, fill: on ? "#fff" : "#ccc", stroke: on ? "#333" : "none" }, svg);
      if (on) { const t = svgEl("text", { x, y: y + 20, "text-anchor": "middle", "font-size": 10 }, svg); t.textContent = `H${h}`; }
    }
  }
  const t = el("table", { class: "data", id: "paths-table" }, root);
  el("tr", {}, t, "<th class='l'>receiver B (input)</th><th class='l'>sender A</th><th>effect</th>");
  for (const p of C.paths) {
    const tr = el("tr", {}, t);
    const b = el("td", { class: "l" }, tr);
    headChip(D, p.later[0], p.later[1], b);
    b.appendChild(document.createTextNode(` ${p.kind}`));
    headChip(D, p.earlier[0], p.earlier[1], el("td", { class: "l" }, tr));
    el("td", { "data-value": p.effect }, tr).textContent = fmtNum(p.effect);
  }
}
