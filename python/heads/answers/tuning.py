"""heads.answers.tuning: which split each summary column is measured on, the metric an answer
reports by default, and an experiment's tune: keys resolved: for each arm (a value of every swept
key but the tuned ones and the seed) the tuned value with the lowest mean validation metric over
seeds (select: the one rule compare, plot-sweep and the report call), the sweep seen through that
choice (view: only the chosen runs, the tuned keys no longer swept), and the table of every tried
value (table).

Selection reads the validation split only: select() touches no column but the validation metric,
the swept keys and the status. Knows the summary's columns (heads.answers.sweepaxes); nothing of
printing, plotting or HTML.
"""
import copy

import numpy as np

from ..core import stats
from ..core.configs import format_value
from ..read.results import group_runs, plain
from .sweepaxes import label, ordered, short, swept_keys

# column -> (split, what the figure is); the tokens column that says how much it covers
SPLITS = {
    "test_loss": ("test", "held-out loss over every window of the test split, once, at the end "
                          "of training"),
    "val_loss": ("validation", "held-out loss over every window of the validation split, once, "
                               "at the end of training"),
    "final_eval_loss": ("validation", "the last periodic evaluation, on a fixed subset of the "
                                      "validation split"),
    "min_eval_loss": ("validation", "a selection, not a held-out figure: the lowest of the "
                                    "periodic evaluations over the steps, chosen on the "
                                    "validation split it reports"),
    "final_train_loss": ("train", "the last logged training loss, on the training split"),
}
TOKENS = {"test_loss": "test_tokens", "val_loss": "val_tokens"}


def has(s, column):
    """Whether some complete run of the Summary s has a number in column."""
    if column not in s.data:
        return False
    return any(s["status"][i] == "complete" and _finite(s[column][i]) for i in range(s.n))


def _finite(v):
    try:
        return np.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def split_of(metric):
    """(split, description) of a summary column; ('?', '') for one this module does not know."""
    return SPLITS.get(metric, ("?", ""))


def default_metric(s):
    """(metric, note): test_loss when the runs have a test split (note None), else val_loss (the
    whole validation split), else final_eval_loss (files written before /heldout), with a note
    saying why."""
    if has(s, "test_loss"):
        return "test_loss", None
    if has(s, "val_loss"):
        return "val_loss", ("the runs have no test split: reported on the validation split "
                            "(val_loss) instead")
    return "final_eval_loss", ("the runs have no /heldout (written before it): reported on the "
                               "last periodic evaluation of the validation split "
                               "(final_eval_loss)")


def selection_metric(s):
    """The validation column selection reads: val_loss, else (files before /heldout)
    final_eval_loss, also on the validation split."""
    return "val_loss" if has(s, "val_loss") else "final_eval_loss"


def tuned_keys(s):
    """The experiment's tune: keys (summary.h5's attribute 'tuned') that are summary columns."""
    return [k for k in getattr(s, "tuned", None) or [] if k in s.data]


class Selection:
    """What select() decided: keys (tuned), metric (the validation column it read), arm_keys (the
    other swept keys), and arms {arm values: {"tried": [{"value": tuple of the tuned values,
    "mean", "std", "n", "values", "rows", "tokens"}], "chosen": tuple, "rows": [row indices of
    the chosen value's runs], "edge": [tuned keys whose chosen value is the first or last
    tried]}} in the sweep's order."""

    def __init__(self, keys, metric, arm_keys, arms):
        self.keys, self.metric, self.arm_keys, self.arms = keys, metric, arm_keys, arms

    def value_text(self, value):
        """'lr 0.003' or 'lr 0.003, wd 0.1'."""
        return label(self.keys, value)


def select(s):
    """THE selection of a tuned sweep: per arm, the tuned value whose complete runs have the
    lowest mean validation metric over seeds (the first tried on a tie; a value with no number
    never wins), or None for a sweep without tune:. Reads the validation metric only."""
    keys = tuned_keys(s)
    if not keys:
        return None
    metric = selection_metric(s)
    assert split_of(metric)[0] == "validation", metric  # never the test split
    arm_keys = [k for k in swept_keys(s) if k not in keys]
    runs = group_runs(s, arm_keys + keys)
    tried_order = {k: ordered([v[len(arm_keys) + j] for v in runs]) for j, k in enumerate(keys)}
    arms = {}
    for values, rows in runs.items():
        arm, value = values[:len(arm_keys)], values[len(arm_keys):]
        losses = [float(s[metric][i]) for i in rows]
        m, sd, n = stats.mean_std(losses)
        tokens = tokens_of(s, TOKENS.get(metric), rows)
        arms.setdefault(arm, {"tried": []})["tried"].append(
            {"value": value, "mean": m, "std": sd, "n": n, "values": losses, "rows": rows,
             "tokens": tokens})
    for arm, a in arms.items():
        a["tried"].sort(key=lambda t: tuple(tried_order[k].index(v)
                                            for k, v in zip(keys, t["value"])))
        scored = [t for t in a["tried"] if t["n"]]
        best = min(scored, key=lambda t: t["mean"]) if scored else a["tried"][0]
        a["chosen"], a["rows"] = best["value"], best["rows"]
        a["edge"] = [k for j, k in enumerate(keys)
                     if len({t["value"][j] for t in a["tried"]}) > 1
                     and best["value"][j] in _ends([t["value"][j] for t in a["tried"]])]
    return Selection(keys, metric, arm_keys, arms)


def _ends(values):
    """The first and last of values in their order (numbers by size, else as tried)."""
    o = ordered(values)
    return {o[0], o[-1]}


def tokens_of(s, column, rows):
    """The tokens per run of a column's figure over rows: sorted distinct values ([] when the
    summary has none)."""
    if column is None or column not in s.data:
        return []
    return sorted({int(float(s[column][i])) for i in rows if _finite(s[column][i])})


def view(s, selection):
    """The Summary s as its answers see a tuned sweep: the tuned keys no longer swept, and only
    the chosen value's runs complete (the others 'not chosen'), so that every comparison, figure
    and CSV of it is of the tuned arms."""
    v = copy.copy(s)
    v.swept = [k for k in s.swept if k not in selection.keys]
    v.tuned = []
    chosen = {i for a in selection.arms.values() for i in a["rows"]}
    v.data = dict(s.data)
    v.data["status"] = np.array([("complete" if i in chosen else "not chosen")
                                 if s["status"][i] == "complete" else s["status"][i]
                                 for i in range(s.n)], dtype=object)
    return v


def tokens_text(tokens):
    """'13,824' or '13,312–13,824' tokens per run; '?' when unknown."""
    if not tokens:
        return "?"
    return f"{tokens[0]:,}" if len(tokens) == 1 else f"{tokens[0]:,}–{tokens[-1]:,}"


def table(selection, digits=4):
    """The tuning table: per arm its keys, the chosen value, the validation metric (mean ± std
    (n)) at every tried value (the chosen one marked *), and the tokens per run it covers;
    {"header", "rows", "notes", "n_text", "json"} as heads.answers.compare's tables."""
    sel = selection
    values = []
    for a in sel.arms.values():
        values += [t["value"] for t in a["tried"] if t["value"] not in values]
    values = sorted(values, key=lambda v: tuple(
        ordered([w[j] for w in values]).index(x) for j, x in enumerate(v)))
    name = ", ".join(short(k) for k in sel.keys)
    header = [short(k) for k in sel.arm_keys] + [f"chosen {name}"] + \
        [f"{sel.metric} at {sel.value_text(v)}" for v in values] + ["tokens/run"]
    rows, arms_json, warnings = [], [], []
    for arm, a in sel.arms.items():
        by_value = {t["value"]: t for t in a["tried"]}
        cells = [format_value(v) for v in arm] + [", ".join(format_value(x) for x in a["chosen"])]
        for v in values:
            t = by_value.get(v)
            if t is None or not t["n"]:
                cells.append("n/a")
                continue
            sd = f" ± {t['std']:.{digits}f}" if t["n"] > 1 else ""
            mark = " *" if v == a["chosen"] else ""
            cells.append(f"{t['mean']:.{digits}f}{sd} (n {t['n']}){mark}")
        cells.append(tokens_text(sorted({x for t in a["tried"] for x in t["tokens"]})))
        rows.append(cells)
        where = label(sel.arm_keys, arm) or "the experiment"
        for k in a["edge"]:
            tried = ordered([t["value"][sel.keys.index(k)] for t in a["tried"]])
            warnings.append(f"warning: {where}: the chosen {short(k)} "
                            f"{format_value(a['chosen'][sel.keys.index(k)])} is at the edge of "
                            f"the tried range ({', '.join(format_value(x) for x in tried)}): the "
                            "best value may lie beyond it; widen tune:")
        arms_json.append({"keys": dict(zip(sel.arm_keys, arm)),
                          "chosen": dict(zip(sel.keys, a["chosen"])), "edge": a["edge"],
                          "tried": [{"value": dict(zip(sel.keys, t["value"])), "mean": t["mean"],
                                     "std": t["std"], "n": t["n"], "values": t["values"],
                                     "tokens": t["tokens"]} for t in a["tried"]]})
    split, what = split_of(sel.metric)
    tried = ", ".join(format_value(v[0]) if len(v) == 1 else sel.value_text(v) for v in values)
    notes = [f"tuned over {name} ({tried}): each arm "
             f"(every value of {', '.join(short(k) for k in sel.arm_keys) or 'the experiment'})"
             f" at the value with the lowest mean {sel.metric} over seeds (marked *), chosen on "
             f"the {split} split ({what}); tokens/run: the {split} tokens each figure covers; "
             "the test split is never read to choose."] + warnings
    return {"header": header, "rows": rows, "notes": notes, "n_text": len(sel.arm_keys) + 1,
            "json": {"keys": sel.keys, "selection_metric": sel.metric, "selection_split": split,
                     "arm_keys": sel.arm_keys, "arms": arms_json, "warnings": warnings}}


def chosen_text(selection, arm):
    """The chosen tuned value of an arm, as a cell: '0.003' or '0.003, 0.1'."""
    a = selection.arms.get(arm)
    return ", ".join(format_value(plain(x)) for x in a["chosen"]) if a else "n/a"



def figure_series(selection):
    """What the tuning figure draws (plot-sweep's tuning.png, the report's chart): the first
    tuned key on x, one series per arm (and per value of the other tuned keys), each point the
    validation metric's mean, sample std, n and every seed, and whether it is the chosen value;
    with log_x: whether x is better on a log scale (numbers > 0 spanning more than 10x, or a
    learning rate)."""
    sel = selection
    key = sel.keys[0]
    series = []
    for arm, a in sel.arms.items():
        rests = list(dict.fromkeys(t["value"][1:] for t in a["tried"]))
        for rest in rests:
            points = [{"x": t["value"][0], "mean": t["mean"], "std": t["std"], "n": t["n"],
                       "values": t["values"], "chosen": t["value"] == a["chosen"]}
                      for t in a["tried"] if t["value"][1:] == rest]
            name = label(sel.arm_keys, arm) or "all runs"
            if rest:
                name += " (" + label(sel.keys[1:], rest) + ")"
            series.append({"arm": dict(zip(sel.arm_keys, arm)),
                           "rest": dict(zip(sel.keys[1:], rest)), "label": name,
                           "points": points})
    xs = [p["x"] for sr in series for p in sr["points"]]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    log_x = numeric and min(xs) > 0 and (max(xs) > 10 * min(xs) or short(key) == "lr")
    return {"key": key, "metric": sel.metric, "split": split_of(sel.metric)[0],
            "numeric": numeric, "log_x": bool(log_x), "series": series,
            "x_values": ordered(xs)}
