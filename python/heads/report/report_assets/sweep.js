/* sweep.js: the page of a sweep (scripts/report SWEEP_DIR): loss against the key compared along
 * (n_head, else the one swept key; a series per group of the other swept keys; mean ± std and
 * every seed), for a tuned sweep the validation metric against the tuned key and the tuning
 * table, the comparison table of scripts/compare (Welch p, Holm p, heads needed), the
 * pruning curves of every layout and heads needed per group, for a sweep over train.head_l0 the
 * heads the learned gates kept beside the λ = 0 runs' pruning curves (and the tables of
 * scripts/compare for it), head-class counts, and a row and link per run. Reads the JSON of python/heads/report/report_sweep.py; uses chart.js and
 * common.js. Knows nothing of HDF5. */
"use strict";

function buildSweepLoss(D, root) {
  const series = [];
  D.series.forEach((s, k) => {
    const colour = headColour(k, D.series.length);
    /* a layout's points are categories: not joined by lines */
    series.push({ name: (s.label || "mean") + " ± std", color: colour, width: 2, marker: 3.5,
                  line: D.by !== "layout",
                  points: s.points.map(p => [p.x, p.mean]), err: s.points.map(p => p.std || 0) });
    series.push({ name: (s.label ? s.label + ": " : "") + "each seed", color: colour, line: false, marker: 2.5,
                  hollow: true, points: s.points.flatMap(p => p.values.map(v => [p.x, v])) });
  });
  const all = series.flatMap(s => s.points.map(p => p[1])).filter(v => v > 0);
  const logy = all.length > 0 && Math.max(...all) / Math.min(...all) > 3;
  const svg = lineChart(root, series, { width: 760, height: 360, logy, xticks: D.xticks,
                                        xlabel: D.x_label,
                                        ylabel: `${D.metric} (mean ± sample std)` + (logy ? ", log scale" : "") });
  svg.id = "sweep-loss";
  chartLegend(root, svg, series);
}

/* a table of scripts/compare (header, rows, notes, n_text: the leading text columns) */
function buildTable(T, root, id) {
  const t = el("table", { class: "data", id }, root);
  el("tr", {}, t, T.header.map((c, i) => `<th class="${i < T.n_text ? "l" : ""}">${escapeHtml(c)}</th>`).join(""));
  for (const row of T.rows)
    el("tr", {}, t, row.map((c, i) => `<td class="${i < T.n_text ? "l" : ""}">${escapeHtml(c)}</td>`).join(""));
  for (const n of T.notes) el("p", { class: "note" }, root).textContent = n;
}

function buildCompare(D, root) {
  buildTable(D.compare, root, "compare-table");
}

/* a tuned sweep: the validation metric against the first tuned key, a line per arm (± std, every
 * seed hollow, the chosen value ringed), then the tuning table of scripts/compare */
function buildTuning(D, root) {
  const F = D.tuning.figure;
  el("p", { class: "note" }, root, `${F.metric} (the ${F.split} split) against ${F.key}: mean ± sample std over ` +
     "seeds, hollow: each seed; ringed: each arm's chosen value (the lowest mean). The test split is never read to choose.");
  const xs = F.numeric ? (v => v) : (v => F.x_values.indexOf(v));
  const series = [];
  F.series.forEach((s, k) => {
    const colour = headColour(k, F.series.length);
    const pts = s.points.filter(p => p.n > 0);
    series.push({ name: s.label, color: colour, width: 2, marker: 3.5,
                  points: pts.map(p => [xs(p.x), p.mean]), err: pts.map(p => p.std || 0) });
    series.push({ name: `${s.label}: each seed`, color: colour, line: false, marker: 2.5, hollow: true, nolegend: true,
                  points: pts.flatMap(p => p.values.map(v => [xs(p.x), v])) });
    series.push({ name: `${s.label}: chosen`, color: "#000", line: false, marker: 7, hollow: true, nolegend: true,
                  points: pts.filter(p => p.chosen).map(p => [xs(p.x), p.mean]) });
  });
  const svg = lineChart(root, series, { width: 760, height: 360, logx: F.log_x,
                                        xticks: F.x_values.map(v => [xs(v), String(v)]),
                                        xlabel: F.key + (F.log_x ? " (log scale)" : ""),
                                        ylabel: `${F.metric}, ${F.split} split (mean ± sample std)` });
  svg.id = "sweep-tuning";
  chartLegend(root, svg, series);
  buildTable(D.tuning.table, root, "tuning-table");
}

/* a sweep over train.head_l0: per group the λ = 0 runs' mean pruning curves against heads left
 * and every λ's heads kept and loss (± std both ways, every seed hollow); then compare's tables */
function buildGates(D, root) {
  const G = D.gates;
  el("p", { class: "note" }, root, "Held-out loss against the heads left (all layers). Lines: the λ = 0 runs pruned " +
     "(Michel et al. 2019), mean ± sample std over seeds, per criterion. Squares: the heads the learned L0 gates kept " +
     "open (Voita et al. 2019) and the loss with only those, mean ± sample std over seeds both ways; hollow: each seed.");
  const curveColours = { importance: "#1f77b4", delta_loss: "#2ca02c" };
  const gateColours = ["#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  G.groups.forEach((g, k) => {
    if (g.label) el("h3", {}, root, escapeHtml(g.label));
    const series = g.curves.map(c => ({
      name: `pruning λ = 0: ${c.title} (${plural(c.n, "seed")})`, color: curveColours[c.criterion] || "#444",
      width: 2, marker: 2.5, points: c.heads_left.map((x, i) => [x, c.mean[i]]), err: c.std.map(v => v || 0) }));
    g.points.forEach((p, j) => {
      const colour = gateColours[j % gateColours.length];
      series.push({ name: `gates λ = ${p.lambda} (${plural(p.n, "seed")})`, color: colour, line: false,
                    marker: 5, points: [[p.heads_mean, p.loss_mean]], err: [p.loss_std || 0], xerr: [p.heads_std || 0] },
                  { name: `gates λ = ${p.lambda}: each seed`, color: colour, line: false, hollow: true,
                    marker: 3, nolegend: true, points: p.seeds });
    });
    const all = series.flatMap(s => s.points.map(p => p[1])).filter(v => v !== null && v > 0);
    const logy = all.length > 0 && Math.max(...all) / Math.min(...all) > 3;
    const svg = lineChart(root, series, { width: 760, height: 380, logy, xlabel: "heads left (all layers)",
                                          ylabel: "held-out eval loss" + (logy ? " (log scale)" : "") });
    svg.id = `sweep-gates-${k}`;
    chartLegend(root, svg, series);
  });
  G.tables.forEach((T, k) => {
    el("h3", {}, root, escapeHtml(T.title));
    buildTable(T, root, `gates-table-${k}`);
  });
}

/* the head study of a sweep: every point's mean pruning curve on one axis per criterion, and heads
 * needed against the key compared along, a series per group */
function buildSweepPruning(D, root) {
  const P = D.pruning;
  const crit = Object.keys(P.curves);
  if (crit.length) {
    el("p", { class: "note" }, root, "Mean held-out loss over seeds against the fraction of all heads pruned " +
       "(Michel et al. 2019: the lowest-scoring heads left removed a few at a time, the scores measured again " +
       "after each step), one line per layout.");
    const row = el("div", { class: "grids" }, root);
    for (const c of crit) {
      const box = el("div", { "data-criterion": c }, row);
      el("div", { class: "note" }, box, escapeHtml(P.curves[c].title));
      const n = P.curves[c].series.length;
      const series = P.curves[c].series.map((s, k) => ({
        name: `${s.label} (${plural(s.seeds, "seed")})`,
        color: headColour(k, n), width: 2, marker: 2.5, points: s.fraction.map((x, i) => [x, s.mean[i]]) }));
      const all = series.flatMap(s => s.points.map(p => p[1])).filter(v => v !== null && v > 0);
      const logy = all.length > 0 && Math.max(...all) / Math.min(...all) > 3;
      const svg = lineChart(box, series, { width: 560, height: 320, logy, xlabel: "fraction of all heads pruned",
                                           ylabel: "mean held-out eval loss" + (logy ? " (log scale)" : "") });
      svg.id = `sweep-prune-${c}`;
      chartLegend(box, svg, series);
    }
  }
  if (P.heads_needed.length) {
    el("h3", {}, root, `Heads needed against ${escapeHtml(D.x_label)}`);
    const series = [];
    P.heads_needed.forEach((g, k) => {
      const colour = headColour(k, P.heads_needed.length);
      const name = g.label ? ` (${g.label})` : "";
      series.push(
        { name: "all heads (n_head × n_layer)" + name, color: colour, width: 1, dash: "4 3", marker: 2.5,
          line: D.by !== "layout", points: g.points.map(p => [p.x, p.all_heads]) },
        { name: "heads needed, mean ± std" + name, color: colour, width: 2, marker: 3.5,
          line: D.by !== "layout",
          points: g.points.map(p => [p.x, p.mean]), err: g.points.map(p => p.std || 0) },
        { name: "heads needed, each seed" + name, color: colour, line: false, hollow: true, marker: 2.5,
          points: g.points.flatMap(p => p.values.map(v => [p.x, v])) });
    });
    const svg = lineChart(root, series, { width: 640, height: 320, ymin: 0, xticks: D.xticks,
                                          xlabel: D.x_label, ylabel: "heads (all layers)" });
    svg.id = "sweep-heads-needed";
    chartLegend(root, svg, series);
    el("p", { class: "note" }, root, `Heads needed: the fewest heads left on a run's pruning curves whose held-out loss ` +
       `(and every earlier point's) is within ${escapeHtml(P.tolerance_text)} of the unpruned loss, the fewer of the two criteria (the summary's ` +
       "heads_needed; the comparison table has them per row).");
  }
}

function buildClasses(D, root) {
  const classes = D.class_names;
  const cols = [["point", "runs"], ["heads", "heads per layer × layers"]].concat(classes.map(c => [c, c])).concat([["bar", "share"]]);
  const t = el("table", { class: "data", id: "class-table" }, root);
  el("tr", {}, t, cols.map(([, title]) => `<th>${escapeHtml(title)}</th>`).join(""));
  for (const r of D.class_counts) {
    const total = classes.reduce((a, c) => a + r.counts[c], 0) || 1;
    const bar = `<div class="bars">` + classes.map(c => `<div title="${escapeHtml(c)} ${fmtNum(r.counts[c])}" style="width:${100 * r.counts[c] / total}%;background:${CLASS_COLOURS[c] || "#999"}"></div>`).join("") + "</div>";
    el("tr", {}, t, `<td class="l">${escapeHtml(r.label)}</td><td>${escapeHtml(r.heads)}</td>` +
       classes.map(c => `<td>${fmtNum(r.counts[c])}</td>`).join("") + `<td>${bar}</td>`);
  }
  el("p", { class: "legend" }, root, classes.map(c => `<span><span class="sw" style="background:${CLASS_COLOURS[c] || "#999"};height:10px"></span>${escapeHtml(c)}</span>`).join(""));
}

function buildRuns(D, root) {
  const cols = [["run", "run"], ["status", "status"], ["n_head", "n_head"], ["d_head", "d_head"],
                ["seed", "seed"], ["final_eval_loss", "final eval loss"], ["classes", "head classes"],
                ["report", "report"]];
  const t = sortableTable(root, "runs-table", cols, D.runs.map(r => Object.assign({}, r)),
                          (k, v) => k === "report" ? "" : fmtNum(v));
  /* the report column: a link per run (sortableTable writes text; links are added per render) */
  const link = () => t.querySelectorAll("tbody tr").forEach(tr => {
    const td = tr.children[cols.length - 1];
    const href = td.dataset.value;
    setMarkup(td, href ? `<a href="${encodeURI(href)}">${escapeHtml(href.split("/").pop())}</a>` : "–");
  });
  link();
  t.querySelectorAll("th").forEach(th => th.addEventListener("click", link));
}

function buildSweepPage(D) {
  header(`${D.name}: sweep report`, `${D.n_complete} complete of ${plural(D.runs.length, "run")}; width rule ${D.width}` +
         (D.description ? `; ${D.description}` : ""));
  const sections = [["loss", `Loss against ${D.x_label}`]];
  if (D.tuning) sections.push(["tuning", "Tuning"]);
  sections.push(["compare", "Comparison"]);
  if (D.pruning) sections.push(["pruning", "Pruning"]);
  if (D.gates) sections.push(["gates", "Learned head gates"]);
  sections.push(["classes", "Head classes"], ["runs", "Runs"]);
  nav(sections);
  const sec = {};
  for (const [id, title] of sections) sec[id] = section(id, title);
  buildSweepLoss(D, sec.loss);
  el("p", { class: "note" }, sec.loss, "Filled points and bars: mean ± sample standard deviation over seeds; hollow points: every seed.");
  if (D.tuning) buildTuning(D, sec.tuning);
  buildCompare(D, sec.compare);
  if (D.pruning) buildSweepPruning(D, sec.pruning);
  if (D.gates) buildGates(D, sec.gates);
  buildClasses(D, sec.classes);
  buildRuns(D, sec.runs);
}
