"""heads.answers.sweepaxes: how a sweep's runs are laid out for its answers (heads.answers.compare, heads.plots.plot_sweep,
heads.report.report_sweep): the swept keys, the key compared along (`--by`) and the groups the other
swept keys form, the points (one per combination of every swept key but the seed, with their
runs), labels that name them, the head-class columns of the summary, and the CSV written beside
a figure.

Knows a Summary's columns; nothing of statistics, plotting or HTML.
"""
import csv
import math
import os

from ..read import pruning
from ..core.cli import UserError
from ..core import safefile
from ..core.configs import format_value
from ..read.results import CLASSES, group_runs
from ..core.words import plural

SEED = "train.seed"
HEAD_KEYS = ("model.n_head", "n_head")  # the by key of a head-count comparison
LAYOUT = "layout"  # the swept key of an experiment's points: a label per point ('4×32')
# keys that are columns of every comparison already (n_head, d_head): compared along, they are
# not repeated as a column of their own
OWN_COLUMNS = ("model.n_head", "model.d_head")
# summary columns that start like head-class counts (heads_<class>) but are not classes
NEEDED_COLUMNS = ["heads_needed"] + [f"heads_needed_{c}" for c in pruning.CRITERIA]


def swept_keys(s):
    """The summary's swept keys (its column names) without the seed, in grid order."""
    return [k for k in s.swept if k != SEED and k in s.data]


def short(key):
    return key.split(".")[-1]


def resolve_key(s, name, what="--by"):
    """A swept key named in full (model.n_kv_head) or by its last part (n_kv_head)."""
    keys = swept_keys(s)
    hits = [k for k in keys if k == name or short(k) == name]
    if len(hits) != 1:
        raise UserError(f"{what} {name}: not a swept key of {s.dir} (swept: "
                        + (", ".join(keys) or "nothing but the seed") + ")")
    return hits[0]


def choose_by(s, by=None):
    """The key the comparison runs along: --by, else the layout of an experiment's points, else
    model.n_head when it was swept, else the grid's first swept key (the only one, or the first
    of several: the others form groups)."""
    keys = swept_keys(s)
    if by is not None:
        return resolve_key(s, by)
    if LAYOUT in keys:
        return LAYOUT
    if "model.n_head" in keys:
        return "model.n_head"
    if keys:
        return keys[0]
    return "n_head"  # nothing but seeds swept: one row per head count (one row)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ordered(values):
    """Distinct values in order: numerically when all are numbers, else first-seen (grid) order."""
    seen = list(dict.fromkeys(values))
    return sorted(seen) if all(is_number(v) for v in seen) else seen


class Layout:
    """The points of a sweep: by (the key compared along), groups (the other swept keys), and
    points {(group values..., by value): [row indices of its complete runs]} in display order."""

    def __init__(self, s, by=None):
        self.s = s
        self.by = choose_by(s, by)
        self.group_keys = [k for k in swept_keys(s) if k != self.by]
        raw = group_runs(s, self.group_keys + [self.by])
        group_order = ordered_groups([k[:-1] for k in raw])
        by_order = ordered([k[-1] for k in raw])
        self.by_values = by_order
        self.groups = group_order
        self.points = {k: raw[k] for k in sorted(
            raw, key=lambda k: (group_order.index(k[:-1]), by_order.index(k[-1])))}

    @property
    def keys(self):
        """The columns naming a point: the group keys, then the by key."""
        return self.group_keys + [self.by]

    def group_label(self, group):
        return label(self.group_keys, group)

    def point_label(self, point):
        """'2 heads', '4×32' (a layout) or 'n_kv_head 2', with the group in brackets: '2 heads
        (lr 0.003)'."""
        text = plural(point[-1], "head") if self.by in HEAD_KEYS else \
            format_value(point[-1]) if self.by == LAYOUT else label([self.by], point[-1:])
        return text + (f" ({self.group_label(point[:-1])})" if self.group_keys else "")

    @property
    def layout_heads(self):
        """Whether the points are compared along their layout and its labels name n_head×d_head
        (the experiment's points set n_head or d_head): n_head and d_head are then the label."""
        return self.by == LAYOUT and any(k in getattr(self.s, "layout_keys", [])
                                         for k in OWN_COLUMNS)

    def axis_label(self):
        """The name of the axis compared along, as figures and the report print it."""
        if self.by in HEAD_KEYS:
            return "number of heads"
        if self.by == LAYOUT:
            return "layout (heads × d_head)" if self.layout_heads else "layout"
        return self.by

    def values(self, point, column):
        """The column's values (floats) over the runs of a point."""
        return [float(self.s[column][i]) for i in self.points[point]]


def ordered_groups(groups):
    """Group tuples in order: each position by ordered(), lexicographically."""
    groups = list(dict.fromkeys(groups))
    if not groups or not groups[0]:
        return groups
    ranks = [ordered([g[j] for g in groups]) for j in range(len(groups[0]))]
    return sorted(groups, key=lambda g: tuple(ranks[j].index(v) for j, v in enumerate(g)))


def label(keys, values):
    """'n_kv_head 2, pos rope': a point's or group's values, named."""
    return ", ".join(f"{short(k)} {format_value(v)}" for k, v in zip(keys, values))


def class_names(s):
    """The head classes the summary counts (heads_<class> columns, the pruning columns left out)."""
    names = list(CLASSES)
    names += [c[6:] for c in s.columns if c.startswith("heads_") and c not in NEEDED_COLUMNS
              and c[6:] not in names]
    return names


def class_counts(s, layout):
    """[(point, all heads, seeds, {class: mean count over seeds})] of every point: the counts of
    a point sum to n_head x n_layer."""
    classes = class_names(s)
    out = []
    for point, idx in layout.points.items():
        counts = {c: sum(float(s[f"heads_{c}"][i]) for i in idx) / len(idx)
                  if f"heads_{c}" in s.data else 0.0 for c in classes}
        all_heads = sum(int(s["n_head"][i]) * int(s["n_layer"][i]) for i in idx) / len(idx)
        out.append((point, all_heads, len(idx), counts))
    return out


def tolerance_of(s):
    """(relative tolerance, floor in nats) the summary's heads-needed columns were made with."""
    return s.tolerance, s.tolerance_floor


def write_csv(figure_path, columns, rows):
    """NAME.csv beside NAME.png|svg|pdf: the numbers a figure draws, with named columns."""
    path = os.path.splitext(figure_path)[0] + ".csv"
    with safefile.open_write(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for row in rows:
            w.writerow([cell_text(v) for v in row])
    return path


def cell_text(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return repr(v)  # every digit: the tests compare against a recomputation
    return format_value(v)
