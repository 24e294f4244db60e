"""heads.answers.l0curve: a sweep over train.head_l0 (Voita et al. 2019's learned Hard Concrete head gates
with an L0 penalty) as the answer to "how many heads does training keep?": per λ the heads each
seed keeps open (/heads/kept) and its held-out loss with only those heads, beside Michel et al.
2019's pruning curves (/prune) of the λ = 0 run of the same seed at the same number of heads
left; the kept shapes (heads kept per layer) of every λ, which experiments/l0_scratch.yaml trains
from scratch, and the comparison of the pruned models with those scratch runs at equal steps.

Knows the summary's columns (through heads.answers.sweepaxes), /heads/kept and /prune (through
heads.read.pruning); nothing of plotting, printing or HTML.
"""
import math
import os

import numpy as np

from ..sweep import sweepread
from ..core import configs, stats
from ..read import pruning, results
from ..core.cli import UserError
from .sweepaxes import SEED, label, short, swept_keys
from ..core.words import fmt_p, plural

LAMBDA = "train.head_l0"
KEPT = "heads/kept"            # [L, H] uint8: 1 = the head's gate is open at the end
SHAPE = "train.heads_kept"     # the kept shape a scratch run trains: heads kept per layer


def is_gate_sweep(s):
    """Whether the Summary s swept the L0 penalty (and so has an answer of this module)."""
    return LAMBDA in swept_keys(s)


def read_kept(f):
    """The kept mask [L, H] (bool) of an open results file of a gated run, else None."""
    if KEPT not in f:
        return None
    return np.asarray(f[KEPT][()]).astype(bool)


def shape_text(per_layer):
    """A kept shape as the config writes it: heads kept per layer, '3,5'."""
    return ",".join(str(int(k)) for k in per_layer)


def loss_at(heads_left, eval_loss, k):
    """The loss of a pruning curve at k heads left: the curve's point when it has one, else
    linear in the heads between the two points around k; None outside the curve."""
    left = np.asarray(heads_left, dtype=float)
    loss = np.asarray(eval_loss, dtype=float)
    order = np.argsort(left)
    left, loss = left[order], loss[order]
    if not left[0] <= k <= left[-1]:
        return None
    return float(np.interp(k, left, loss))


class GateRun:
    """One complete run of a λ sweep: its group (the swept keys other than λ and the seed), λ,
    seed, the kept mask, its final held-out loss and its pruning curves."""

    def __init__(self, s, i, group_keys):
        self.run = str(s["run"][i])
        self.group = tuple(results.plain(s[k][i]) for k in group_keys)
        self.lam = float(results.plain(s[LAMBDA][i]))
        self.seed = int(results.plain(s[SEED][i])) if SEED in s.data else int(s["seed"][i])
        self.all_heads = int(s["n_head"][i]) * int(s["n_layer"][i])
        self.eval_loss = float(s["final_eval_loss"][i])
        with results.open_file(s.run_path(i)) as f:  # a damaged file: one line
            self.kept = read_kept(f)
            self.curves = pruning.read_curves(f)
        if self.lam > 0 and self.kept is None:
            raise UserError(f"{s.run_path(i)}: a run with train.head_l0 {self.lam:g} but no "
                            f"/{KEPT}: made by a harness without learned head gates?")

    @property
    def heads_kept(self):
        return self.all_heads if self.kept is None else int(self.kept.sum())

    @property
    def per_layer(self):
        """Heads kept in each layer."""
        return [int(k) for k in self.kept.sum(axis=1)] if self.kept is not None else None


def gate_runs(s):
    """(group keys, [GateRun]) of the complete runs of a λ sweep, in the summary's order."""
    if not is_gate_sweep(s):
        raise UserError(f"{s.dir}: not a sweep over {LAMBDA} (swept: "
                        + (", ".join(swept_keys(s)) or "nothing but the seed") + ")")
    group_keys = [k for k in swept_keys(s) if k != LAMBDA]
    runs = [GateRun(s, i, group_keys) for i in range(s.n) if s["status"][i] == "complete"]
    return group_keys, runs


def median_shape(shapes):
    """The kept shape of several seeds: per layer the median of their counts, halves rounded up
    (a scratch run must not be given fewer heads than the middle seed kept)."""
    a = np.asarray(shapes, dtype=float)
    return [int(math.ceil(v)) for v in np.median(a, axis=0)]


def gate_curve(s):
    """The answer of a λ sweep, per group: {"group_keys", "groups": [{"group", "label",
    "michel": {criterion: {"heads_left", "mean", "std", "n", "seeds"}} (the λ = 0 runs' curves,
    mean over the seeds that share their points), "points": [per λ: {"lambda", "seeds",
    "runs", "heads_kept", "eval_loss" (per seed), "shapes" (heads kept per layer, per seed),
    "shape" (median_shape), "matched": {criterion: the λ = 0 run of the same seed pruned to the
    same number of heads: its loss per seed (None without that run or outside its curve)}}]}]}."""
    group_keys, runs = gate_runs(s)
    groups = []
    for group in dict.fromkeys(r.group for r in runs):
        mine = [r for r in runs if r.group == group]
        base = {r.seed: r for r in mine if r.lam == 0}
        michel = {}
        for c in pruning.CRITERIA:
            curves = [base[seed].curves[c] for seed in sorted(base) if c in base[seed].curves]
            if not curves:
                continue
            left = curves[0][0]
            same = [(seed, loss) for seed, (l, loss) in
                    zip(sorted(base), curves) if len(l) == len(left) and (l == left).all()]
            losses = np.asarray([loss for _, loss in same])
            std = losses.std(axis=0, ddof=1) if len(same) > 1 else np.full(len(left), np.nan)
            michel[c] = {"heads_left": [int(x) for x in left],
                         "mean": [float(x) for x in losses.mean(axis=0)],
                         "std": [float(x) for x in std], "n": len(same),
                         "seeds": [seed for seed, _ in same]}
        points = []
        for lam in sorted({r.lam for r in mine}):
            at = sorted((r for r in mine if r.lam == lam), key=lambda r: r.seed)
            point = {"lambda": lam, "seeds": [r.seed for r in at], "runs": [r.run for r in at],
                     "heads_kept": [r.heads_kept for r in at],
                     "all_heads": at[0].all_heads,
                     "eval_loss": [r.eval_loss for r in at],
                     "shapes": [r.per_layer for r in at], "matched": {}}
            point["shape"] = median_shape(point["shapes"]) if lam > 0 else None
            for c in michel:
                point["matched"][c] = [
                    loss_at(*base[r.seed].curves[c], r.heads_kept)
                    if r.seed in base and c in base[r.seed].curves else None for r in at]
            points.append(point)
        groups.append({"group": dict(zip(group_keys, group)), "label": label(group_keys, group),
                       "michel": michel, "points": points})
    return {"group_keys": group_keys, "groups": groups}


def _mean_std(values, digits):
    m, sd, n = stats.mean_std([v for v in values if v is not None])
    if n == 0:
        return "n/a"
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if n > 1 else f"{m:.{digits}f}"


def _decimals(values):
    """Decimals that show 3 significant digits of the smallest mean loss, at least 4."""
    m = min((v for v in values if v is not None and v > 0), default=1.0)
    return max(4, 2 - math.floor(math.log10(m)))


def gate_table(s):
    """The λ sweep as a table (the rows of scripts/compare's second table): per group and λ the
    seeds, heads kept (mean ± std), the held-out loss with them, and per pruning criterion the
    loss of the λ = 0 run of the same seed pruned to the same number of heads, the difference
    (gates − pruning: negative = the gates keep a better model of that size), Welch's t and p,
    and Holm's p over the table's tests. {"header", "rows", "notes", "n_text", "json"}."""
    answer = gate_curve(s)
    criteria = [c for c in pruning.CRITERIA
                if any(c in g["michel"] for g in answer["groups"])]
    cols = [short(k) for k in answer["group_keys"]] + [
        "head_l0 (λ)", "seeds", "heads kept (mean ± std)", "kept per layer (median)",
        "eval loss (mean ± std)"]
    for c in criteria:
        cols += [f"{c}: pruned to as many heads", f"{c}: Δ gates − pruning", f"{c}: p",
                 f"{c}: Holm p"]
    rows, tests, json_rows = [], [], []
    for g in answer["groups"]:
        digits = _decimals([v for p in g["points"] for v in p["eval_loss"]])
        for p in g["points"]:
            cells = [configs.format_value(v) for v in g["group"].values()]
            kept_m, kept_sd, _ = stats.mean_std([float(v) for v in p["heads_kept"]])
            cells += [configs.format_value(p["lambda"]), str(len(p["seeds"])),
                      f"{_mean_std(p['heads_kept'], 1)} of {p['all_heads']}",
                      shape_text(p["shape"]) if p["shape"] else "all",
                      _mean_std(p["eval_loss"], digits)]
            row = {"group": g["group"], "lambda": p["lambda"], "seeds": p["seeds"],
                   "runs": p["runs"], "heads_kept": {"mean": kept_m, "std": kept_sd,
                                                     "values": p["heads_kept"]},
                   "all_heads": p["all_heads"], "shapes": p["shapes"], "shape": p["shape"],
                   "eval_loss": dict(zip(("mean", "std", "n"), stats.mean_std(p["eval_loss"])),
                                     values=p["eval_loss"]),
                   "pruning": {}}
            for c in criteria:
                matched = p["matched"].get(c, [])
                pairs = [(a, b) for a, b in zip(p["eval_loss"], matched) if b is not None]
                if p["lambda"] == 0 or not pairs:
                    cells += ["(the pruned model)" if p["lambda"] == 0 else "n/a", "", "", ""]
                    continue
                gates, pruned = [a for a, _ in pairs], [b for _, b in pairs]
                t, df, pv = stats.welch_t_test(gates, pruned)
                delta = stats.mean_std(gates)[0] - stats.mean_std(pruned)[0]
                cells += [_mean_std(pruned, digits), f"{delta:+.{digits}f}", fmt_p(pv), ""]
                row["pruning"][c] = {"values": matched, "mean": stats.mean_std(pruned)[0],
                                     "std": stats.mean_std(pruned)[1], "n": len(pairs),
                                     "delta": delta, "t": t, "df": df, "p": pv, "holm_p": None}
                tests.append((len(rows), c, pv))
            rows.append(cells)
            json_rows.append(row)
    for (k, c, _), q in zip(tests, pruning.holm([pv for _, _, pv in tests])):
        rows[k][cols.index(f"{c}: Holm p")] = fmt_p(q)
        json_rows[k]["pruning"][c]["holm_p"] = q
    family = sum(1 for *_, pv in tests if pv == pv)
    notes = [f"{s.name}: learned head gates (Hard Concrete, L0 penalty λ = train.head_l0) "
             "against pruning the λ = 0 run of the same seed (/prune) to the same number of "
             "heads; heads kept: gates open at the end (/heads/kept), of n_head × n_layer; eval "
             "loss: the final held-out loss with only those heads; pruned to as many heads: "
             "the λ = 0 run's pruning curve at that many heads left (between two points of the "
             "curve: linear in the heads), per criterion; Δ = mean over seeds of the gated "
             "runs − of the pruned ones (negative = the gates keep a better model of that size); "
             "two-sided Welch t-test; Holm p over the "
             f"{plural(family, 'distinct test')} of this table."]
    return {"header": cols, "rows": rows, "notes": notes,
            "n_text": len(answer["group_keys"]),
            "json": {"groups": answer["group_keys"], "holm_family": family, "rows": json_rows,
                     "curves": [{"group": g["group"], "michel": g["michel"]}
                                for g in answer["groups"]]}}


def scratch_table(s, scratch):
    """Voita et al.'s second claim: the pruned models of the λ sweep s against the same kept
    shapes trained from scratch (the Summary scratch, a sweep over train.heads_kept, every
    other value as s's), at equal steps: per λ whose median kept shape the scratch sweep has,
    the held-out loss of the gated runs and of the scratch runs (mean ± std over seeds), the
    difference (pruned − scratch: negative = the pruned model is better), Welch's t and p.
    {"header", "rows", "notes", "n_text": 0, "json"}."""
    if SHAPE not in swept_keys(scratch):
        raise UserError(f"{scratch.dir}: not a sweep over {SHAPE} (swept: "
                        + (", ".join(swept_keys(scratch)) or "nothing but the seed") + ")")
    answer = gate_curve(s)
    if len(answer["groups"]) != 1:
        raise UserError(f"{s.dir}: the scratch comparison needs a λ sweep of one group "
                        f"(this one has {len(answer['groups'])})")
    by_shape = {}
    for i in range(scratch.n):
        if scratch["status"][i] != "complete":
            continue
        shape = str(results.plain(scratch[SHAPE][i])).replace(" ", "")
        by_shape.setdefault(shape, []).append(
            (int(results.plain(scratch[SEED][i])), float(scratch["final_eval_loss"][i]),
             int(scratch["final_step"][i])))
    cols = ["head_l0 (λ)", "kept per layer (median; each seed)", "steps", "pruned: seeds",
            "pruned: eval loss", "scratch: seeds", "scratch: eval loss",
            "Δ pruned − scratch", "Welch t (df)", "p"]
    rows, json_rows = [], []
    points = [p for p in answer["groups"][0]["points"] if p["lambda"] > 0]
    digits = _decimals([v for p in points for v in p["eval_loss"]])
    steps_pruned = {int(s["final_step"][i]) for i in range(s.n) if s["status"][i] == "complete"}
    for p in points:
        shape = shape_text(p["shape"])
        if shape not in by_shape:
            continue
        runs = sorted(by_shape[shape])
        scratch_loss = [loss for _, loss, _ in runs]
        steps = sorted(steps_pruned | {st for *_, st in runs})
        t, df, pv = stats.welch_t_test(p["eval_loss"], scratch_loss)
        delta = stats.mean_std(p["eval_loss"])[0] - stats.mean_std(scratch_loss)[0]
        rows.append([configs.format_value(p["lambda"]),
                     f"{shape} ({'; '.join(shape_text(x) for x in p['shapes'])})",
                     "/".join(map(str, steps)), str(len(p["seeds"])),
                     _mean_std(p["eval_loss"], digits), str(len(runs)),
                     _mean_std(scratch_loss, digits), f"{delta:+.{digits}f}",
                     f"{t:+.2f} ({df:.1f})" if t == t else "n/a", fmt_p(pv)])
        json_rows.append({"lambda": p["lambda"], "shape": p["shape"], "shapes": p["shapes"],
                          "steps": steps, "pruned": {"seeds": p["seeds"],
                                                     "values": p["eval_loss"]},
                          "scratch": {"seeds": [seed for seed, *_ in runs],
                                      "values": scratch_loss},
                          "delta": delta, "t": t, "df": df, "p": pv})
    if not rows:
        have = ", ".join(sorted(by_shape)) or "no complete runs"
        want = ", ".join(shape_text(p["shape"]) for p in points)
        raise UserError(f"{scratch.dir}: no kept shape of {s.dir} among its runs (it has "
                        f"{have}; the λ sweep kept {want})")
    notes = [f"{s.name} against {scratch.name}: the gated runs (pruned by their gates) against "
             "their median kept shape trained from scratch, the other heads' gates fixed closed "
             "from step 0; eval loss: final held-out loss, mean ± sample std over seeds; Δ = "
             "pruned − scratch (negative = the pruned model is better); two-sided Welch t-test, "
             "Welch–Satterthwaite df. A pruned seed whose own shape differs from the median "
             "is still counted (each seed's shape in brackets)."]
    if len({n for r in json_rows for n in r["steps"]}) > 1:
        notes.append("warning: the runs compared did not all train the same number of steps")
    return {"header": cols, "rows": rows, "notes": notes, "n_text": 0,
            "json": {"rows": json_rows}}


def scratch_dir_beside(directory):
    """results/l0 -> results/l0_scratch, the scratch sweep's default place (None if absent)."""
    d = directory.rstrip("/") + "_scratch"
    return d if os.path.exists(os.path.join(d, "summary.h5")) else None


def tables(s, scratch_dir=None):
    """[(title, table)] that scripts/compare and the sweep report add for a λ sweep: the gates
    against pruning and, with a scratch sweep (scratch_dir, else DIR_scratch beside the sweep
    when it exists), the pruned models against their shapes from scratch; [] otherwise."""
    if not is_gate_sweep(s):
        if scratch_dir:
            raise UserError(f"--scratch {scratch_dir}: {s.dir} is not a sweep over {LAMBDA}")
        return []
    out = [("Learned head gates against pruning at the same number of heads", gate_table(s))]
    scratch_dir = scratch_dir or scratch_dir_beside(s.dir)
    if scratch_dir:
        out.append(("The pruned models against their kept shapes trained from scratch",
                    scratch_table(s, sweepread.Summary(scratch_dir))))
    return out
