"""The Queue page's charts as inline SVG drawn on the server: no script, and no `style`
attribute (the pages' policy allows neither; colours are presentation attributes).

Two charts, each a pure function of the figures it is given: the landings, promotions and
ejections over time (cumulative step lines: the gap between the first and the other two is
what waits), and the distribution of the time from landing to promotion (a histogram of
"nice" bins). Each draws at most CHART_LANDINGS landings, the newest, and says so when it
leaves some out; with nothing to draw it says there is nothing yet. Every text in them —
the label, the ticks, the tooltips — is spelled out (`integrator.escape.visible`) and
XML-escaped here, so they can be given names an agent chose.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from markupsafe import Markup

from integrator.escape import visible
from integrator.limits import CHART_LANDINGS
from integrator.promotion.stats import Passage
from integrator.web.views import duration

WIDTH, HEIGHT = 600, 250
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 48, 38  # the plot's margins
LEGEND = 36  # the baseline of the legend's line, under the label
BINS = 12  # most bins of the histogram
# Bin widths a person reads at a glance, in seconds: the smallest that fits is chosen.
NICE = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
        43200, 86400, 172800, 604800)  # fmt: skip
SERIES = (  # what is counted, its name in the legend, its colour
    ("landed", "landings", "#0969da"),
    ("promoted", "promotions", "#1a7f37"),
    ("ejected", "ejections", "#cf222e"),
)
AXIS, GRID, INK, MUTED, BAR = "#57606a", "#d0d7de", "#1f2328", "#656d76", "#8250df"


def esc(value: object) -> str:
    """`value` as text safe inside an SVG element or attribute."""
    return html.escape(visible(str(value)), quote=True)


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, words: object, *, anchor: str = "start", cls: str = "") -> str:
    klass = f' class="{esc(cls)}"' if cls else ""
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="11" '
        f'fill="{MUTED}"{klass}>{esc(words)}</text>'
    )


def _frame(ident: str, label: str, body: list[str]) -> Markup:
    """The `<svg>` around `body`: an image named by `label`."""
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{esc(ident)}" class="chart" role="img" '
        f'aria-labelledby="{esc(ident)}-title" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="system-ui, sans-serif">'
        f'<title id="{esc(ident)}-title">{esc(label)}</title>'
        f'<text x="{LEFT}" y="16" font-size="13" font-weight="600" fill="{INK}">'
        f"{esc(label)}</text>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _empty(ident: str, label: str, words: str) -> Markup:
    middle = TOP + (HEIGHT - TOP - BOTTOM) / 2
    return _frame(
        ident,
        label,
        [
            f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="{GRID}"/>',
            _text(WIDTH / 2, middle, words, anchor="middle", cls="empty"),
        ],
    )


def _when(moment: float, span: float) -> str:
    at = datetime.fromtimestamp(moment, UTC)
    return at.strftime("%H:%M:%S" if span < 3600 else "%m-%d %H:%M")


def _y_axis(top: int, scale: float, base: float, right: float) -> list[str]:
    """Grid lines and labels at 0, half and `top` (counts)."""
    out = []
    for value in sorted({0, top // 2, top}):
        y = base - value * scale
        out.append(
            f'<line x1="{LEFT}" y1="{_n(y)}" x2="{_n(right)}" y2="{_n(y)}" stroke="{GRID}"/>'
        )
        out.append(_text(LEFT - 6, y + 4, value, anchor="end"))
    return out


def flow(
    passages: Sequence[Passage],
    *,
    label: str,
    now: float | None = None,
    limit: int = CHART_LANDINGS,
    ident: str = "flow-chart",
) -> Markup:
    """Landings, promotions and ejections over time, counted from the oldest landing shown:
    one step line each (`path.series`, `data-series` its name, `data-count` its events)."""
    kept = sorted(passages, key=lambda p: p.landed)[-limit:] if limit > 0 else []
    if not kept:
        return _empty(ident, label, "nothing landed yet")
    events = {
        key: sorted(t for p in kept if (t := getattr(p, key)) is not None) for key, _, _ in SERIES
    }
    start = kept[0].landed
    end = max([start + 1, *(ts[-1] for ts in events.values() if ts), *([now] if now else [])])
    right, base = WIDTH - RIGHT, HEIGHT - BOTTOM
    xs = (right - LEFT) / (end - start)
    top = len(kept)
    scale = (base - TOP) / top
    body = _y_axis(top, scale, base, right)
    body.append(f'<line x1="{LEFT}" y1="{base}" x2="{right}" y2="{base}" stroke="{AXIS}"/>')
    for at, anchor in ((start, "start"), ((start + end) / 2, "middle"), (end, "end")):
        x = LEFT + (at - start) * xs
        body.append(_text(x, base + 16, _when(at, end - start), anchor=anchor, cls="tick"))
    body.append(_text(right, base + 32, "UTC", anchor="end"))
    legend = float(LEFT)
    for key, name, colour in SERIES:
        times = events[key]
        d = [f"M{_n(LEFT)} {_n(base)}"]
        for count, at in enumerate(times, 1):
            d.append(f"H{_n(LEFT + (at - start) * xs)}V{_n(base - count * scale)}")
        d.append(f"H{_n(right)}")
        body.append(
            f'<path class="series" data-series="{key}" data-count="{len(times)}" '
            f'd="{"".join(d)}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{esc(f'{name}: {len(times)}')}</title></path>"
        )
        body.append(
            f'<rect x="{_n(legend)}" y="{LEGEND - 6}" width="12" height="4" fill="{colour}"/>'
        )
        body.append(_text(legend + 16, LEGEND, f"{name} {len(times)}"))
        legend += 130
    if len(passages) > len(kept):
        body.append(
            _text(
                LEFT,
                base + 32,
                f"the newest {len(kept):,} of {len(passages):,} landings",
                cls="capped",
            )
        )
    return _frame(ident, label, body)


def bin_width(longest: float, bins: int = BINS) -> float:
    """The smallest nice width whose `bins` bins hold `longest` (whole days past a week)."""
    for width in NICE:
        if longest < width * bins:
            return float(width)
    return float(-(-longest // (86400 * bins)) * 86400 or 86400)


def histogram(
    seconds: Sequence[float],
    *,
    label: str,
    limit: int = CHART_LANDINGS,
    ident: str = "latency-chart",
) -> Markup:
    """How long landings took from landing to promotion: one bar (`rect.bar`, `data-count`)
    per bin, from 0 to the bin holding the longest; `seconds` oldest first (the newest
    `limit` are drawn)."""
    kept = [max(0.0, s) for s in seconds[-limit:]] if limit > 0 else []
    if not kept:
        return _empty(ident, label, "nothing promoted yet")
    width = bin_width(max(kept))
    used = min(BINS, int(max(kept) // width) + 1)
    counts = [0] * used
    for value in kept:
        counts[min(used - 1, int(value // width))] += 1
    right, base = WIDTH - RIGHT, HEIGHT - BOTTOM
    step = (right - LEFT) / used
    top = max(counts)
    scale = (base - TOP) / top
    body = _y_axis(top, scale, base, right)
    for i, count in enumerate(counts):
        low, high = duration_of(i * width), duration_of((i + 1) * width)
        x, h = LEFT + i * step, count * scale
        body.append(
            f'<rect class="bar" data-count="{count}" x="{_n(x + 1)}" y="{_n(base - h)}" '
            f'width="{_n(step - 2)}" height="{_n(h)}" fill="{BAR}">'
            f"<title>{esc(f'{low} to {high}: {count}')}</title></rect>"
        )
    body.append(f'<line x1="{LEFT}" y1="{base}" x2="{right}" y2="{base}" stroke="{AXIS}"/>')
    every = max(1, -(-used // 6))  # at most about seven edge labels
    for edge in range(0, used + 1, every):
        body.append(
            _text(
                LEFT + edge * step,
                base + 16,
                duration_of(edge * width),
                anchor="middle",
                cls="tick",
            )
        )
    ordered = sorted(kept)
    median = duration_of(ordered[len(ordered) // 2])
    body.append(_text(LEFT, LEGEND, f"{len(kept)} promoted, median {median}"))
    if len(seconds) > len(kept):
        body.append(
            _text(
                LEFT,
                base + 32,
                f"the newest {len(kept):,} of {len(seconds):,} promotions",
                cls="capped",
            )
        )
    return _frame(ident, label, body)


def duration_of(seconds: float) -> str:
    """`seconds` as `views.duration` says it, with tenths under ten seconds (hundredths
    under one)."""
    if seconds < 10:
        return _n(round(seconds, 2 if seconds < 1 else 1)) + "s"
    return duration(timedelta(seconds=seconds))
