"""heads.report.report_page: one self-contained HTML page from a report's data: the stylesheet, the
page code (report_assets/*.js) and the data (JSON) inlined, nothing fetched at view time, so the
file opens from disk in any browser and can be mailed or archived alone.

Knows the asset files and how to embed JSON safely in HTML; knows nothing of results files.
"""
import base64
import hashlib
import html
import json
import os
import tempfile

from ..core.cli import UserError

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_assets")
SCRIPTS = ["common.js", "chart.js", "steps.js", "run.js", "study.js", "causal.js", "sweep.js"]


def _asset(name):
    with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
        return f.read()


def _json_for_script(data):
    """JSON that cannot end its <script> element early (no "</" or "<!--" inside)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _policy(code):
    """The page's Content-Security-Policy: its own script (by hash) and nothing else runs (no
    inline handler, no other script, no plugin); nothing is fetched but inline styles and images.
    The wall behind the page code's escaping of every string a results file holds."""
    digest = base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
            "img-src data: blob:; object-src 'none'; base-uri 'none'; form-action 'none'")


def render(data):
    """The page's HTML text."""
    code = "\n".join(_asset(name) for name in SCRIPTS) + "\n"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_policy(code)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="heads scripts/report">
<title>{html.escape(str(data.get("name", "report")))}</title>
<style>
{_asset("report.css")}</style>
<script type="application/json" id="report-data">{_json_for_script(data)}</script>
<script>{code}</script>
</head>
<body>
<noscript>This report draws its contents with JavaScript: please allow scripts for this file.
</noscript>
</body>
</html>
"""


def write(path, data):
    """Write the page atomically (a temporary file in the same directory, then rename): an
    earlier report at path stays whole if anything fails. Returns the size in bytes."""
    html = render(data).encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write the report there ({directory} is not a directory)")
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise UserError(f"{path}: cannot write the report there ({e.strerror})")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise UserError(f"{path}: cannot write the report there ({e.strerror})")
        raise
    return len(html)
