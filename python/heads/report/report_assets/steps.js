/* steps.js: the run page's step control (scripts/report RUN.h5): a slider and a select over the
 * run's stored steps (D.score_steps: /attn's snapshots and the weight snapshots' studies), in the
 * sticky menu; the attention explorer, the head table and the composition follow it, the final
 * model by default. At a step with a weight snapshot's study (D.studies) each view is that
 * snapshot's; at a step with maps and scores only, the head table shows those and says what is
 * missing (D.steps_missing: what the file lacks and the command that adds it). Reads the data of
 * python/heads/report/report_run.py and report_steps.py; uses common.js. Knows nothing of HDF5. */
"use strict";

/* the head study shown at score-step index si: the final model's at the last step, a weight
 * snapshot's where the file holds its study, else null (maps and scores only) */
function studyAt(D, si) {
  if (si === D.score_steps.length - 1)
    return { classes: D.classes, marked: D.marked, heads: D.heads, circuits: D.circuits, final: true };
  return D.studies[String(D.score_steps[si])] || null;
}

/* what step si holds, in a few words */
function stepKind(D, si) {
  const S = studyAt(D, si);
  return !S ? "maps and scores" : S.final ? "final model" : "weight snapshot";
}

/* one sentence on what the head table and the composition show at step si */
function stepText(D, si) {
  const step = D.score_steps[si], S = studyAt(D, si);
  if (S && S.final) return `Step ${step}: the final model.`;
  if (S) return `Step ${step}: the weight snapshot's study (/study_steps/${step}), as the final model's.`;
  const have = D.score_steps.filter((_, i) => i < D.score_steps.length - 1 && studyAt(D, i));
  return `Step ${step} has attention maps and pattern scores only (no weight snapshot's study): no ablation ` +
         "Δloss, importance or composition there (–); the class is the score's. " +
         (have.length ? `Steps with a snapshot's study (● in the step control): ${have.join(", ")}. ` : "");
}

/* the control in parent (the menu); onStep(si) on every change */
function buildStepControl(D, parent, onStep) {
  const n = D.score_steps.length;
  const box = el("span", { class: "stepctl", id: "step-control" }, parent);
  const range = el("input", { type: "range", id: "step-range", min: 0, max: n - 1, step: 1,
                              "aria-label": "step" }, el("label", {}, box, "step "));
  range.value = String(n - 1);
  const sel = el("select", { id: "sel-step", "aria-label": "step" }, box);
  D.score_steps.forEach((s, i) => {
    el("option", { value: s }, sel).textContent = `${s}` + (i === n - 1 ? " final" : studyAt(D, i) ? " ●" : "");
  });
  sel.value = String(D.score_steps[n - 1]);
  const what = el("span", { class: "what", id: "step-what" }, box);
  what.textContent = stepKind(D, n - 1);
  function set(si) {
    range.value = String(si);
    sel.value = String(D.score_steps[si]);
    what.textContent = stepKind(D, si);
    onStep(si);
  }
  range.addEventListener("input", () => set(+range.value));
  sel.addEventListener("change", () => set(D.score_steps.indexOf(+sel.value)));
}

/* the composition section at step si: the snapshot's scores, or why there are none */
function buildCompositionAt(D, root, si) {
  const kind = document.getElementById("sel-composition");
  root.replaceChildren();
  const S = studyAt(D, si);
  if (!S) {
    el("p", { class: "note", id: "composition-note" }, root).textContent =
      `No composition at step ${D.score_steps[si]}: it is computed from the weights, and this step has no ` +
      "weight snapshot's study (● in the step control)." + (D.steps_missing ? " " + D.steps_missing : "");
    return;
  }
  if (!S.circuits) {
    el("p", { class: "note", id: "composition-note" }, root).textContent = `No composition scores at step ${D.score_steps[si]}.`;
    return;
  }
  el("p", { class: "note", id: "composition-step", "data-step": D.score_steps[si] }, root).textContent =
    S.final ? `Step ${D.score_steps[si]}: the final model.` : `Step ${D.score_steps[si]}: the weight snapshot's scores (/study_steps/${D.score_steps[si]}/circuits).`;
  buildComposition(Object.assign({}, D, { classes: S.classes, circuits: S.circuits }), root, kind ? kind.value : null);
}
