"""heads.sweep.experiments: experiment files (base config + grid + points + tune + width rule + seeds;
format at the top of experiments/heads.yaml) expanded into runs with readable names (heads.sweep.runnames);
mistakes reported as `file:line:col: message` (UserError). tune: keys are swept as grid: keys
and named in `tuned`: which value counts is the answers' choice (heads.answers.tuning).

Knows the config keys through heads.core.harness; knows nothing of running, results or Slurm.
"""
import difflib
import itertools
import os
import re

import yaml

from ..core.cli import UserError
from ..core.configs import Marked, format_value, read_config_file, read_text, values_equal
from ..core.harness import REPO, key_default, key_sections, resolve_key
from ..read.pruning import DEFAULT_FLOOR, DEFAULT_TOLERANCE
from .runnames import name_part


WIDTH_RULES = {
    "fixed_width": "d_head = d_model / n_head: E = d_model, same parameters and FLOPs at every "
                   "head count (Vaswani et al. 2017, Table 3(A))",
    "fixed_d_head": "d_head stays fixed: E = n_head * d_head grows with the heads (Qwen-style)",
    "free": "d_head as the config says (0 = d_model / n_head)",
}
EXPERIMENT_KEYS = ["name", "description", "base", "set", "grid", "points", "tune", "width",
                   "seeds", "tolerance", "tolerance_floor"]
LAYOUT = "layout"  # the swept key of an experiment's points: one value (a label) per point

class Run:
    """One run of an experiment: its name, its --set overrides and what it varies."""

    def __init__(self, name, overrides, swept, index, point_index=0):
        self.name = name
        self.overrides = overrides  # {'section.key': value} passed to the harness with --set
        self.swept = swept          # {'section.key': value} for every grid key (incl. train.seed),
        #                             and 'layout': the point's label when the experiment has points
        self.index = index
        self.point_index = point_index  # which of the experiment's points (0 without points)

    @property
    def seed(self):
        return self.swept.get("train.seed", self.overrides.get("train.seed"))

    @property
    def point(self):
        """The swept values other than the seed: runs with one point are repeats over seeds."""
        return tuple((k, v) for k, v in self.swept.items() if k != "train.seed")

    def __repr__(self):
        return f"Run({self.name!r})"


class Experiment:
    """An experiment file. See the comment at the top of experiments/heads.yaml for the format."""

    def __init__(self, path, sets=()):
        """sets: `section.key=value` assignments (sweep --set), applied to every run."""
        self.path = path
        self._cli_where = {}
        self.text = read_text(path, "experiment file")
        self.doc = Marked(path, self.text)
        d = self.doc.data
        if not isinstance(d, dict):
            raise UserError(f"{path}:1:1: an experiment file is a mapping with keys "
                            + ", ".join(EXPERIMENT_KEYS))
        for key in d:
            if key not in EXPERIMENT_KEYS:
                hint = difflib.get_close_matches(key, EXPERIMENT_KEYS, 1)
                raise UserError(self.doc.where((key,)) + f"unknown key '{key}'"
                                + (f" (did you mean '{hint[0]}'?)" if hint else "")
                                + "; known: " + ", ".join(EXPERIMENT_KEYS))
        stem = os.path.splitext(os.path.basename(path))[0]
        self.name = str(d.get("name", stem))
        if not re.fullmatch(r"[A-Za-z0-9._-]+", self.name):
            raise UserError(self.doc.where(("name",), True) +
                            f"name '{self.name}' names a directory under results/: "
                            "use letters, digits, '.', '_' or '-'")
        self.description = str(d.get("description", "")).strip()

        if "base" not in d:
            raise UserError(f"{path}:1:1: missing 'base:', the config file every run starts from "
                            "(e.g. base: configs/heads12.yaml)")
        self.base = str(d["base"])
        self.base_path = self.base if os.path.isabs(self.base) else os.path.join(REPO, self.base)
        if not os.path.isfile(self.base_path):
            raise UserError(self.doc.where(("base",), True) +
                            f"base config '{self.base}' not found (relative paths are relative to "
                            f"the repository root {REPO})")
        try:
            self.base_config = read_config_file(self.base_path)
        except (OSError, yaml.YAMLError) as e:
            raise UserError(self.doc.where(("base",), True) + f"cannot read '{self.base}': {e}")

        self.set = self._flat_mapping("set", lists=False)
        self.grid = self._flat_mapping("grid", lists=True)
        self.tuned = self._read_tune()
        if "seeds" in d:
            if "train.seed" in self.grid:
                raise UserError(self.doc.where(("seeds",)) +
                                "seeds: and grid: train.seed both sweep the seed; keep one")
            seeds = d["seeds"]
            if isinstance(seeds, int) and not isinstance(seeds, bool):
                seeds = list(range(seeds))  # `seeds: 3` means 0, 1, 2
            self._check_list(("seeds",), seeds, "train.seed")
            self.grid["train.seed"] = seeds
            self._grid_paths["train.seed"] = ("seeds",)
        self.points = self._read_points()
        self._apply_sets(sets)
        for key in self.grid:
            if key in self.set and key not in self._cli_where:
                raise UserError(self.doc.where(self._set_paths[key]) + f"{key} is both set here "
                                f"and swept in {'tune:' if key in self.tuned else 'grid:'}; "
                                "keep one")

        self.tolerance = self._number("tolerance", DEFAULT_TOLERANCE, 1, "the relative eval-loss "
                                      "tolerance of 'heads needed' is a number in [0, 1), e.g. "
                                      "0.05 for 5%")
        self.tolerance_floor = self._number("tolerance_floor", DEFAULT_FLOOR, 100, "the absolute "
                                            "floor of the 'heads needed' tolerance, in nats, is a "
                                            "number in [0, 100), e.g. 0.01")
        self.width = str(d.get("width", "free"))
        if self.width not in WIDTH_RULES:
            hint = difflib.get_close_matches(self.width, WIDTH_RULES, 1)
            raise UserError(self.doc.where(("width",), True) + f"unknown width rule '{self.width}'"
                            + (f" (did you mean '{hint[0]}'?)" if hint else "")
                            + "; use fixed_width, fixed_d_head or free")
        self.runs = self._expand()

    # -- parsing helpers

    def _number(self, key, default, below, what):
        """The number at key (default when absent) in [0, below), else a UserError: what."""
        v = self.doc.data.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < below:
            raise UserError(self.doc.where((key,), True) + f"{key} {v!r}: {what}")
        return v

    def _section_key(self, key, where):
        """'n_head' -> 'model.n_head'; 'model.n_head' stays: the harness's own resolution (its
        message when the key is unknown or in several sections, placed at `where`)."""
        try:
            return resolve_key(str(key))
        except UserError as e:
            raise UserError(where + str(e)) from None

    def _apply_sets(self, assignments):
        """sweep --set section.key=value, as the harness's --set (the value read as YAML), for
        every run: it replaces the file's set: value of that key; a swept key is an error."""
        for text in assignments:
            where = f"--set:1:1: '{text}': "
            key, eq, value_text = text.partition("=")
            if not eq or not key:
                raise UserError(where + "expected key=value, e.g. model.n_head=4 or n_head=4")
            try:  # read as an experiment file's values are (3e-3 is a number, as the harness says)
                value = Marked("--set", value_text).data if value_text else ""
            except UserError as e:
                raise UserError(where + "the value is not a YAML value (" + str(e).split(": ", 1)[-1] + ")")
            full = self._section_key(key, where)
            if full in self.grid:
                section = "tune:" if full in self.tuned else "grid:"
                raise UserError(where + f"{full} is swept in {section} of {self.path}; a --set "
                                f"would replace every value of the sweep (remove it from {section}"
                                " instead)")
            if any(full in point for point in self.points):
                raise UserError(where + f"{full} is given in points: of {self.path}; a --set "
                                "would replace it in every point (remove it from the points "
                                "instead)")
            if self._chosen_by_sweep(full, [value], where):
                continue  # the value that means "the sweep's choice": as if not given
            self.set[full] = value
            self._cli_where[full] = where

    def _chosen_by_sweep(self, key, values, where):
        """Whether key is one the sweep chooses per run, given only as the value that means
        "choose it" (train.threads: 0): then it is as if left out. Any other value of such a key
        is an error naming the key, the rule and the value the rule gives."""
        if key == "output.path":
            raise UserError(where + "output.path is chosen by the sweep: each run writes "
                            "<results>/<experiment>/<run>.h5 (scripts/sweep --results DIR moves "
                            "them); remove it")
        if key != "train.threads":
            return False
        for v in values:
            if not (isinstance(v, int) and not isinstance(v, bool) and v == 0):
                n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                    else os.cpu_count() or 1
                raise UserError(where + f"train.threads {format_value(v)}: the sweep gives each "
                                f"run max(1, nproc // -j) threads ({n} at -j 1, {max(1, n // 2)} "
                                f"at -j 2 with nproc {n} here); write 0 (the sweep's choice) or "
                                "remove it, or give scripts/sweep --threads "
                                f"{format_value(v)}")
        return True

    def _check_list(self, keypath, values, key):
        if not isinstance(values, list) or not values:
            raise UserError(self.doc.where(keypath, True) +
                            f"{key}: expected a non-empty list of values, e.g. [1, 2, 4]")
        for i, v in enumerate(values):
            if isinstance(v, (dict, list)) or v is None:
                raise UserError(self.doc.where(keypath + (i,), True) +
                                f"{key}: each value must be a single number or word")
        seen = set()
        for i, v in enumerate(values):
            if format_value(v) in seen:
                raise UserError(self.doc.where(keypath + (i,), True) +
                                f"{key}: value {format_value(v)} is listed twice")
            seen.add(format_value(v))

    def _flat_mapping(self, what, lists):
        """`set:`/`grid:` as {'section.key': value}; accepts `section.key: v`, `key: v` and
        `section: {key: v}`."""
        out, paths = self._mapping(self.doc.data.get(what, {}) or {}, (what,), what, lists)
        setattr(self, f"_{what}_paths", paths)
        return out

    def _mapping(self, d, base, what, lists):
        """A mapping of the file at keypath base as ({'section.key': value}, {key: keypath})."""
        paths = {}
        if not isinstance(d, dict):
            raise UserError(self.doc.where(base, True) +
                            f"{what}: expected a mapping of section.key: value")
        out = {}
        items = []
        for key, value in d.items():
            if key in key_sections() and isinstance(value, dict):
                items += [(f"{key}.{k}", v, base + (key, k)) for k, v in value.items()]
            else:
                items.append((key, value, base + (key,)))
        for key, value, keypath in items:
            full = self._section_key(key, self.doc.where(keypath))
            if full in out:
                raise UserError(self.doc.where(keypath) + f"{full} is given twice")
            if lists:
                self._check_list(keypath, value, full)
            elif isinstance(value, (dict, list)) or value is None:
                raise UserError(self.doc.where(keypath, True) +
                                f"{full}: a sweep passes values with --set, so each must be a "
                                "single number or word (put lists in the base config)")
            if self._chosen_by_sweep(full, value if lists else [value], self.doc.where(keypath)):
                continue  # the value that means "the sweep's choice": as if not given
            out[full] = value
            paths[full] = keypath
        return out, paths

    def _read_tune(self):
        """`tune:` as grid: is ({'section.key': [values]}, a product), added to the grid after
        its keys, and the list of its keys: no key of grid: or the seed (set: and points: are
        checked against the grid after)."""
        tune, paths = self._mapping(self.doc.data.get("tune", {}) or {}, ("tune",), "tune", True)
        for key, keypath in paths.items():
            if key in self.grid:
                raise UserError(self.doc.where(keypath) + f"{key} is both in tune: and swept in "
                                "grid:; keep one (tune: picks one value per arm, grid: keeps "
                                "every value as its own arm)")
            if key == "train.seed":
                raise UserError(self.doc.where(keypath) + "train.seed in tune: would pick the "
                                "luckiest seed; seeds: repeats every tuned value")
        self.grid.update(tune)
        self._grid_paths.update(paths)
        return list(tune)

    def _read_points(self):
        """`points:` as [{'section.key': value}] (each point a mapping, as set: is), checked: no
        key of grid:, set: or the seed, no two points alike."""
        raw = self.doc.data.get("points")
        self._point_paths = []
        if raw is None:
            return []
        if not isinstance(raw, list) or not raw:
            raise UserError(self.doc.where(("points",), True) + "points: expected a non-empty list "
                            "of mappings, e.g. [{n_head: 1}, {n_head: 4, d_head: 32}]")
        points = []
        for i, item in enumerate(raw):
            where = self.doc.where(("points", i), True)
            if item is None:
                item = {}
            if not isinstance(item, dict):
                raise UserError(where + f"point {i + 1}: expected a mapping of section.key: value, "
                                "e.g. {n_head: 4, d_head: 32}")
            values, paths = self._mapping(item, ("points", i), f"point {i + 1}", False)
            for key, keypath in paths.items():
                if key == "train.seed":
                    raise UserError(self.doc.where(keypath) + "train.seed in a point: seeds: "
                                    "crosses every point (or sweep train.seed in grid:)")
                if key in self.grid:
                    raise UserError(self.doc.where(keypath) + f"{key} is both in points: and "
                                    f"swept in {'tune:' if key in self.tuned else 'grid:'}; keep "
                                    "one (grid: and tune: cross every point)")
                if key in self.set:
                    raise UserError(self.doc.where(keypath) + f"{key} is both set in set: and "
                                    "given in points:; keep one (give it in every point that "
                                    "needs another value)")
            points.append(values)
            self._point_paths.append(paths)
        return points

    # -- expansion

    def value_of(self, key, run_values):
        for source in (run_values, self.set, self.base_config):
            if key in source:
                return source[key]
        return key_default(key)

    def where_key(self, key):
        """`file:line:col: ` of the place in the experiment file (or the --set) that sets this
        config key."""
        if key in self._cli_where:
            return self._cli_where[key]
        if key in self._grid_paths:
            return self.doc.where(self._grid_paths[key])
        if key in self._set_paths:
            return self.doc.where(self._set_paths[key])
        for paths in getattr(self, "_point_paths", []):
            if key in paths:
                return self.doc.where(paths[key])
        return self.doc.where(("base",), True)

    def _expand(self):
        keys = list(self.grid)
        # Seeds vary fastest within a grid point, so runs of one point sit together in listings;
        # head counts come first in names; points (in the file's order) vary slowest.
        ordered = [k for k in ("model.n_head", "model.d_head") if k in keys]
        ordered += [k for k in keys if k not in ordered and k != "train.seed"]
        if "train.seed" in keys:
            ordered.append("train.seed")
        self.layout_keys = list(dict.fromkeys(k for point in self.points for k in point))
        heads_keys = ("model.n_head", "model.d_head")
        show_heads = (self.width != "free" or any(k in keys or k in self.layout_keys
                                                  for k in heads_keys))
        runs, names, shapes = [], {}, {}
        index = 0
        for pi, point in enumerate(self.points or [{}]):
            for combo in itertools.product(*(self.grid[k] for k in ordered)):
                values = dict(zip(ordered, combo))
                given = dict(point)
                given.update(values)
                overrides = dict(self.set)
                overrides.update(given)
                n_head, d_model, d_head = self._width_rule(given, overrides, pi)
                if self.width == "fixed_width":  # derived, not swept (0 or the value it takes)
                    values.pop("model.d_head", None)
                parts = []
                if show_heads:
                    parts += [name_part("model.n_head", n_head), name_part("model.d_head", d_head)]
                parts += [name_part(k, v) for k, v in point.items() if k not in heads_keys]
                parts += [name_part(k, values[k]) for k in ordered
                          if k not in heads_keys + ("train.seed",)]
                parts.append(name_part("train.seed", self.value_of("train.seed", given)))
                name = "_".join(parts)
                if name in names:
                    if self.points and names[name][0] != pi:
                        raise UserError(self.doc.where(("points", pi), True) +
                                        f"points {names[name][0] + 1} and {pi + 1} are the same "
                                        f"layout (their runs would both be named '{name}')")
                    raise UserError(f"{self.path}:1:1: runs {names[name][1]} and {index} would "
                                    f"both be named '{name}'; make the grid values distinct")
                names[name] = (pi, index)
                shapes.setdefault(pi, set()).add(f"{n_head}×{d_head}")
                swept = {LAYOUT: None} if self.points else {}
                swept.update(values)
                runs.append(Run(name, overrides, swept, index, pi))
                index += 1
        if self.width == "fixed_width":  # d_head: 0 (or its derived value) in grid: not swept
            self.grid.pop("model.d_head", None)
        self.point_labels = self._labels(shapes)
        for run in runs:
            if self.points:
                run.swept[LAYOUT] = self.point_labels[run.point_index]
        return runs

    def _labels(self, shapes):
        """Each point's label, its value of the layout axis: 'n_head×d_head' (as the runs
        resolve them, when every run of the point has the same) then its other keys ('4×16,
        n_kv_head 2'); distinct, or an error naming the two points."""
        heads = any(k in self.layout_keys for k in ("model.n_head", "model.d_head"))
        labels, seen = [], {}
        for pi, point in enumerate(self.points):
            parts = []
            if heads:
                if len(shapes[pi]) == 1:
                    parts.append(next(iter(shapes[pi])))
                else:  # the grid changes it (d_model swept): the point's own values instead
                    parts += [f"{k.split('.')[-1]} {format_value(point[k])}"
                              for k in ("model.n_head", "model.d_head") if k in point]
            parts += [f"{k.split('.')[-1]} {format_value(v)}" for k, v in point.items()
                      if k not in ("model.n_head", "model.d_head")]
            text = ", ".join(parts) or "base"
            if text in seen:
                raise UserError(self.doc.where(("points", pi), True) +
                                f"points {seen[text] + 1} and {pi + 1} are the same layout "
                                f"({text})")
            seen[text] = pi
            labels.append(text)
        return labels

    def _width_rule(self, given, overrides, pi):
        """(n_head, d_model, d_head) of a run asking for the values given (its point's and grid
        values), the width rule applied to overrides (d_head set when the rule derives it)."""
        n_head = self.value_of("model.n_head", given)
        d_model = self.value_of("model.d_model", given)
        d_head = self.value_of("model.d_head", given)
        if self.width == "fixed_width":
            if not isinstance(n_head, int) or not isinstance(d_model, int) or n_head < 1 \
                    or d_model % n_head:
                key = "model.n_head" if "model.n_head" in given else "model.d_model"
                raise UserError(self._where_run_key(key, pi) + f"width: fixed_width needs d_model "
                                f"divisible by n_head, but d_model {d_model} / n_head {n_head} is "
                                "not whole")
            asked = given.get("model.d_head", self.set.get("model.d_head", 0))
            d_head = d_model // n_head
            if not (isinstance(asked, int) and not isinstance(asked, bool) and asked == 0) \
                    and not values_equal(asked, d_head):
                raise UserError(self._where_run_key("model.d_head", pi) + f"model.d_head "
                                f"{format_value(asked)}: width: fixed_width derives model.d_head"
                                f" = d_model / n_head, {d_model} / {n_head} = {d_head} here; "
                                f"write 0 (or {d_head}) or remove it, or use width: free "
                                "for other widths")
            overrides["model.d_head"] = d_head
        elif self.width == "fixed_d_head":
            if not isinstance(d_head, int) or d_head < 1:
                raise UserError(f"{self.path}:1:1: width: fixed_d_head keeps model.d_head "
                                "fixed, so it needs a value: add it under set: "
                                "(e.g. model.d_head: 16) or to the base config")
            overrides["model.d_head"] = d_head
        elif not d_head and isinstance(n_head, int) and isinstance(d_model, int) \
                and n_head > 0 and d_model % n_head == 0:
            d_head = d_model // n_head
        return n_head, d_model, d_head

    def _where_run_key(self, key, pi):
        """where_key, but a key the point pi gives is placed at that point."""
        if self.points and key in self._point_paths[pi]:
            return self.doc.where(self._point_paths[pi][key])
        return self.where_key(key)

    def swept_keys(self):
        """The summary's swept columns: 'layout' (with points), then the grid's keys (tune:'s
        among them, after the grid's own, then the seed)."""
        return ([LAYOUT] if self.points else []) + list(self.grid)

    def shape_text(self):
        """What the runs cross: '5 layouts x 3 seed', '6 n_head x 3 lr (tuned) x 10 seed'."""
        parts = ([f"{len(self.points)} layouts"] if self.points else []) + [
            f"{len(v)} {k.split('.')[-1]}" + (" (tuned)" if k in self.tuned else "")
            for k, v in self.grid.items()]
        return " x ".join(parts) or "1 run"
