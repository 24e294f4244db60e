"""heads.core.harness: the ./harness program seen from Python: where it is, the command line of one
run, and `harness --shapes` (parameters, FLOPs per token) parsed.

The repository root is two levels above this file; ./harness there is the binary (override:
$HARNESS). The config keys come from `harness --keys`. Knows nothing of experiments or results
files.
"""
import csv
import io
import os
import re
import subprocess

from .cli import UserError
from .configs import format_value


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HARNESS = os.environ.get("HARNESS", os.path.join(REPO, "harness"))

_KEYS = None
_RESOLVED = {}  # key as written -> its section.key, or the UserError saying why not


def _typed(kind, text):
    """A default as `harness --keys` prints it, as the Python value YAML would give."""
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return text


def config_keys():
    """Every config key of the harness, read once from `harness --keys` (the key table of
    src/config/config_keys.c; no copy is kept here): {"model.n_head": {"type", "default", "range",
    "meaning"}} in the harness's order, defaults typed. A harness that cannot run is a UserError."""
    global _KEYS
    if _KEYS is None:
        try:
            p = subprocess.run([HARNESS, "--keys"], capture_output=True, text=True, timeout=60)
        except OSError as e:
            raise UserError(f"cannot run {HARNESS} --keys: {e.strerror} (run `make` first?)") from None
        if p.returncode != 0:
            raise UserError(f"{HARNESS} --keys failed: {(p.stderr or p.stdout).strip()[:300]}")
        rows = list(csv.DictReader(io.StringIO(p.stdout), delimiter="\t"))
        _KEYS = {r["key"]: dict(r, default=_typed(r["type"], r["default"])) for r in rows}
    return _KEYS


def resolve_key(key):
    """The config key as the harness resolves it (`harness --keys KEY`, the resolution of its
    --set): "n_head" -> "model.n_head", "model.n_head" stays. An unknown or ambiguous key is a
    UserError with the harness's message ("'path' is in several sections (data.path,
    output.path); write section.key"), for the caller to put its place in front of."""
    if key not in _RESOLVED:
        try:
            p = subprocess.run([HARNESS, "--keys", key], capture_output=True, text=True, timeout=60)
        except OSError as e:
            raise UserError(f"cannot run {HARNESS} --keys: {e.strerror} (run `make` first?)") from None
        if p.returncode == 0:
            _RESOLVED[key] = p.stdout.splitlines()[1].split("\t", 1)[0]
        elif p.returncode == 2 and p.stderr.startswith("--keys: "):
            _RESOLVED[key] = UserError(p.stderr.strip()[len("--keys: "):])
        else:
            raise UserError(f"{HARNESS} --keys {key} failed: {(p.stderr or p.stdout).strip()[:300]}")
    if isinstance(_RESOLVED[key], UserError):
        raise _RESOLVED[key]
    return _RESOLVED[key]


def keys_markdown():
    """docs/keys.md: every config key as `harness --keys` prints it, as one Markdown table."""
    def cell(text):
        return (text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
                .replace("<", "&lt;").replace(">", "&gt;"))
    lines = ["# Config keys", "",
             "Every key of a config, as `./harness --keys` prints it from the harness's own key table",
             "(`src/config/config_keys.c`). Generated: `scripts/keys-doc > docs/keys.md`; `tests/test_format.py` fails",
             "when this file differs from what the harness prints. A key may be written bare (`n_head`) in",
             "`--set` and in experiment files when one section has it; `./harness --keys NAME` resolves one.",
             "What the keys do, the tasks and training: [configuration.md](configuration.md).", "",
             "| key | type | default | range | meaning |", "|---|---|---|---|---|"]
    for key, row in config_keys().items():
        default = row["default"]
        shown = ("true" if default else "false") if isinstance(default, bool) else str(default) if default != "" else '""'
        lines.append(f"| `{key}` | {row['type']} | {cell(shown)} | {cell(row['range'])} | {cell(row['meaning'])} |")
    return "\n".join(lines) + "\n"


def key_sections():
    """{section: [key names]} of the harness's config keys."""
    out = {}
    for key in config_keys():
        section, name = key.split(".", 1)
        out.setdefault(section, []).append(name)
    return out


def key_default(key):
    """The harness's default for "section.key" (None for an unknown key)."""
    row = config_keys().get(key)
    return row["default"] if row else None


def harness_command(base_path, overrides, extra=()):
    cmd = [HARNESS, base_path]
    for key, value in overrides.items():
        cmd += ["--set", f"{key}={format_value(value)}"]
    return cmd + list(extra)


def parse_shapes(text):
    """(params, forward FLOPs per token, E) from `harness --shapes` output; None where not found."""
    params = flops = width = None
    section = None
    for line in text.splitlines():
        if line.startswith("parameters"):
            section = "params"
        elif line.startswith("matmul FLOPs"):
            section = "flops"
        m = re.match(r"\s*total\s+([\d,]+)\s+([\d,]+)\s*$", line)
        if m and section == "params":
            params = int(m.group(2).replace(",", ""))
        m = re.match(r"\s*total forward\s+([\d,]+)", line)
        if m:
            flops = int(m.group(1).replace(",", ""))
        m = re.search(r"E=H\*d_head=(\d+)", line)
        if m:
            width = int(m.group(1))
    return params, flops, width


def shapes_formula(cfg):
    """Parameters and forward FLOPs per token from the docs/model.md formulas (a check on --shapes)."""
    V, D, H = cfg["vocab_size"], cfg["d_model"], cfg["n_head"]
    dh = cfg["d_head"] or D // H
    E, L, T = H * dh, cfg["n_layer"], cfg["seq_len"]
    per_layer = 3 * D * E + 3 * E + E * D + D + 2 * D
    pos_emb = T * D if cfg.get("pos", "learned") in ("learned", "shortformer") else 0  # none stored otherwise
    params = V * D + pos_emb + L * per_layer + 2 * D + D * V
    flops = L * (2 * D * 3 * E + 2 * T * E + 2 * T * E + 2 * E * D) + 2 * D * V
    return params, flops


def run_shapes(base_path, overrides):
    """Run `harness --shapes`; returns (ok, params, flops, E, message)."""
    cmd = harness_command(base_path, overrides)
    cmd.insert(1, "--shapes")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
    except OSError as e:
        return False, None, None, None, f"cannot run {HARNESS}: {e.strerror} (run `make` first?)"
    if p.returncode != 0:
        return False, None, None, None, (p.stderr.strip() or p.stdout.strip()
                                         or f"harness --shapes exited with {p.returncode}")
    params, flops, width = parse_shapes(p.stdout)
    return True, params, flops, width, ""


def _escape(text):
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _unescape(text):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            i += 1
            c = {"t": "\t", "n": "\n"}.get(text[i], text[i])
        out.append(c)
        i += 1
    return "".join(out)


def compare_configs(requests):
    """Whether each run's recorded config (its config_yaml) is what a config with --set values
    asks for, by the harness's own rule (`harness state --batch`, src/results/runstate.c: both resolved,
    output.path and train.threads aside), in one process for all: requests [(name, config path,
    recorded text, {section.key: value})] -> {name: ("same", ""), ("differs", "model.n_head 2 ->
    4, ..."), or ("refused", the harness's message)}. A harness that cannot answer: UserError."""
    if not requests:
        return {}
    lines = "".join("\t".join(_escape(f) for f in [name, config, recorded] +
                              [f"{k}={format_value(v)}" for k, v in overrides.items()]) + "\n"
                    for name, config, recorded, overrides in requests)
    try:
        p = subprocess.run([HARNESS, "state", "--batch"], input=lines, capture_output=True,
                           text=True, cwd=REPO, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot run {HARNESS} state: {getattr(e, 'strerror', None) or e} "
                        "(run `make` first?)") from None
    answers = {}
    for line in p.stdout.splitlines():
        name, _, rest = line.partition("\t")
        kind, _, text = rest.partition("\t")
        answers[_unescape(name)] = (kind, _unescape(text))
    if p.returncode != 0 or len(answers) != len(requests):
        raise UserError(f"{HARNESS} state --batch failed (exit status {p.returncode}): "
                        f"{(p.stderr or p.stdout).strip()[:300]} (an older harness? run `make`)")
    return answers


def file_rules(paths, wait=0.0):
    """What the harness's own rules say of results paths, in one process (`harness rules --json`,
    src/cli/rules_command.c): [{"path", "guard", "text_sum", "resume", "lock"}] in paths' order;
    "resume" is what --resume continues ({"from", "step", "steps", "status", "place"}) or None. A
    harness that cannot be executed is tried again every 0.2 s for `wait` seconds (one being
    relinked); one that cannot answer: UserError."""
    import json
    import time
    end = time.time() + wait
    while True:
        try:
            p = subprocess.run([HARNESS, "rules", "--json", "--"] + [os.fspath(x) for x in paths],
                               capture_output=True, text=True, timeout=600)
            break
        except OSError as e:
            if time.time() < end:
                time.sleep(0.2)
                continue
            raise UserError(f"cannot run {HARNESS} rules: {e.strerror or e} (run `make` first?)") from None
        except subprocess.TimeoutExpired as e:
            raise UserError(f"cannot run {HARNESS} rules: {e}") from None
    try:
        answers = [json.loads(line) for line in p.stdout.splitlines()[1:]]
    except ValueError:
        answers = []
    if p.returncode != 0 or len(answers) != len(paths):
        raise UserError(f"{HARNESS} rules --json failed (exit status {p.returncode}): "
                        f"{(p.stderr or p.stdout).strip()[:300]} (an older harness? run `make`)")
    return answers


_STORED = {}  # (path, size, mtime) -> the harness's refusal, '' when it accepts the file


def stored_refusal(path):
    """'' when the harness's own readers accept what path stores (`harness check --stored`,
    src/results/check.c: its config_yaml by the loader's rules, /params of that config's shapes,
    every value finite), else the harness's one-line refusal: the Python readers keep no copy of
    those rules. A harness that cannot be run (not built) answers '' (nothing is checked)."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _STORED:
        try:
            p = subprocess.run([HARNESS, "check", "--stored", path], capture_output=True,
                               text=True, errors="replace", timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        line = p.stdout.strip()
        _STORED[key] = "" if p.returncode == 0 or not line else line
    return _STORED[key]
