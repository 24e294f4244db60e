"""figurecheck.py: whether a figure's texts can be read, measured on the figure itself, not by
the code that laid it out (heads.plots.gnuplot.text_px): the suites that draw figures call problems().

- a PNG: no ink within a few pixels of the image's edges (a title or label cut by the edge
  leaves ink there; gnuplot draws nothing else at the edge);
- the same figure drawn as SVG: every <text> gnuplot wrote, measured with DejaVu Sans's own
  metrics (PIL's FreeType) at the SVG's font size, lies inside the canvas, and no two texts
  overlap. (A PNG draws a point as 4/3 of a pixel, an SVG as one: gnuplot places its tics and
  labels for each format's sizes, so the SVG is measured as it is drawn, and the PNG's larger
  text that runs off the canvas shows at its edges.)

Needs PIL (python3-pil), as the report suite does.
"""
import html
import math
import re

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
_FONTS = {}


def _font(px):
    from PIL import ImageFont
    key = round(px * 4) / 4
    if key not in _FONTS:
        _FONTS[key] = ImageFont.truetype(FONT, size=max(1, int(round(key))))
    return _FONTS[key]


def png_edges(path, band=2):
    """The edges of a PNG ('left', 'right', 'top', 'bottom') with ink (a pixel darker than light
    grey) within band pixels of them."""
    import numpy as np
    from PIL import Image
    a = np.asarray(Image.open(path).convert("L"))
    ink = a < 200
    out = []
    for name, cut in (("left", ink[:, :band]), ("right", ink[:, -band:]), ("top", ink[:band]),
                      ("bottom", ink[-band:])):
        if cut.any():
            out.append(name)
    return out


_G = re.compile(r'<g transform="translate\(([-\d.]+),([-\d.]+)\)(?: rotate\(([-\d.]+)\))?"'
                r'[^>]*?font-size="([\d.]+)"[^>]*?text-anchor="(start|middle|end)"[^>]*>\s*'
                r'<text>(.*?)</text>', re.S)


def svg_texts(path, scale=1.0):
    """([(text, its four corners)] of every text of a gnuplot SVG, at scale x its font size;
    the canvas (width, height))."""
    src = open(path, encoding="utf-8").read()
    m = re.search(r'<svg[^>]*width="(\d+)"[^>]*height="(\d+)"', src, re.S)
    canvas = (int(m.group(1)), int(m.group(2)))
    out = []
    for x, y, rot, size, anchor, body in _G.findall(src):
        text = html.unescape(re.sub(r"<[^>]+>", "", body))
        if not text.strip():
            continue
        x, y, px = float(x), float(y), float(size) * scale
        w = _font(px).getlength(text)
        lead = {"start": 0.0, "middle": 0.5, "end": 1.0}[anchor] * w
        # the text's rectangle along its own direction: from -lead to w - lead, and from 0.76
        # em above the baseline to 0.24 em below; turned by the rotation (SVG: clockwise)
        t = math.radians(float(rot or 0))
        c, s = math.cos(t), math.sin(t)
        corners = [(u * c - v * s + x, u * s + v * c + y)
                   for u in (-lead, w - lead) for v in (-0.76 * px, 0.24 * px)]
        corners = [corners[0], corners[1], corners[3], corners[2]]  # in order around
        out.append((text.strip(), corners))
    return out, canvas


def _box(corners):
    xs, ys = [p[0] for p in corners], [p[1] for p in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _overlap(a, b, slack=1.0):
    """Whether two (turned) rectangles, given by their corners in order, overlap by more than
    slack pixels along every axis that could separate them (the separating-axis test)."""
    for poly in (a, b):
        for k in range(4):
            (x0, y0), (x1, y1) = poly[k], poly[(k + 1) % 4]
            n = (y0 - y1, x1 - x0)
            length = math.hypot(*n) or 1.0
            n = (n[0] / length, n[1] / length)
            pa = [p[0] * n[0] + p[1] * n[1] for p in a]
            pb = [p[0] * n[0] + p[1] * n[1] for p in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= slack:
                return False
    return True


def text_problems(svg_path, slack=1.0):
    """Lines naming each text of an SVG that leaves the canvas, and each pair that overlap."""
    texts, (W, H) = svg_texts(svg_path)
    out = []
    for text, corners in texts:
        x0, y0, x1, y1 = _box(corners)
        if x0 < -slack or y0 < -slack or x1 > W + slack or y1 > H + slack:
            out.append(f"'{text}' leaves the {W}x{H} canvas: x {x0:.0f}..{x1:.0f}, "
                       f"y {y0:.0f}..{y1:.0f}")
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if _overlap(texts[i][1], texts[j][1], slack):
                out.append(f"'{texts[i][0]}' and '{texts[j][0]}' overlap")
    return out


def problems(png_path, svg_path=None):
    """Every problem of a figure: the PNG's inked edges, the SVG's texts out of the canvas or
    on top of each other; [] when it can be read."""
    out = [f"ink at the {e} edge of {png_path}" for e in png_edges(png_path)]
    if svg_path:
        out += text_problems(svg_path)
    return out


# The report's charts (inline SVG drawn by report_assets/chart.js), measured by the browser
# itself: every <text> of every svg.chart inside its svg, and no two overlapping. Run with
# selenium's execute_script; returns a list of lines.
REPORT_TEXTS_JS = r"""
const out = [];
const charts = Array.from(document.querySelectorAll("svg.chart"));
charts.forEach((svg, k) => {
  if (!svg.getBoundingClientRect().width) return;  /* a hidden chart (another tab) */
  const box = svg.getBoundingClientRect();
  const texts = Array.from(svg.querySelectorAll("text")).filter(t => t.textContent.trim() &&
      getComputedStyle(t).display !== "none" && t.closest("g.series, g.marker, svg") &&
      !(t.closest("g") && t.closest("g").style.display === "none"));
  const rects = texts.map(t => t.getBoundingClientRect());
  const where = (svg.closest("section") ? svg.closest("section").id : "?") + " chart " + k;
  texts.forEach((t, i) => {
    const r = rects[i];
    if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
        r.bottom > box.bottom + 1)
      out.push(`${where}: '${t.textContent}' leaves its chart (x ${Math.round(r.left - box.left)}..` +
               `${Math.round(r.right - box.left)} of ${Math.round(box.width)})`);
    for (let j = i + 1; j < texts.length; j++) {
      const q = rects[j];
      if (Math.min(r.right, q.right) - Math.max(r.left, q.left) > 1 &&
          Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top) > 1)
        out.push(`${where}: '${t.textContent}' and '${texts[j].textContent}' overlap`);
    }
  });
});
return out;
"""
