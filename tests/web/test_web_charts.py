"""The Queue page's SVG charts, as pure functions: the elements drawn for known figures, the
empty state, the cap on what is drawn, and text an agent chose shown only as text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from markupsafe import Markup

from integrator.escape import visible
from integrator.limits import CHART_LANDINGS
from integrator.promotion.stats import Passage
from integrator.web import charts

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1_780_000_000.0
HOSTILE = "api<script>alert(1)</script>\x1b[2J\u202e\"'&"


def parse(markup: Markup) -> ET.Element:
    """The chart as XML (it must be well-formed), checked for what the pages' policy forbids."""
    root = ET.fromstring(str(markup))
    assert root.tag == f"{SVG}svg"
    for element in root.iter():
        assert "style" not in element.attrib  # the policy refuses inline style
        assert element.tag != f"{SVG}script" and not element.tag.endswith("foreignObject")
        assert not any(name.startswith("on") for name in element.attrib)
    return root


def series(root: ET.Element) -> dict[str, ET.Element]:
    return {p.attrib["data-series"]: p for p in root.iter(f"{SVG}path")}


def bars(root: ET.Element) -> list[int]:
    return [int(r.attrib["data-count"]) for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_the_flow_chart_draws_one_step_line_per_series() -> None:
    """Four landings, two promoted and one ejected: three step lines, each with one rise per
    event, and a legend that counts them."""
    passages = [
        Passage("a", T0, promoted=T0 + 300),
        Passage("b", T0 + 60, promoted=T0 + 300),
        Passage("c", T0 + 120, ejected=T0 + 200),
        Passage("d", T0 + 180),
    ]
    root = parse(charts.flow(passages, label="Landings on main", now=T0 + 400))
    lines = series(root)
    assert sorted(lines) == ["ejected", "landed", "promoted"]
    counts = {k: int(p.attrib["data-count"]) for k, p in lines.items()}
    assert counts == {"landed": 4, "promoted": 2, "ejected": 1}
    for key, path in lines.items():
        d = path.attrib["d"]
        assert d.startswith("M") and d.count("V") == counts[key] and d.count("H") == counts[key] + 1
    # the landings' last rise is at the top of the plot, the promotions' half way
    landed_top = float(lines["landed"].attrib["d"].split("V")[-1].split("H")[0])
    promoted_top = float(lines["promoted"].attrib["d"].split("V")[-1].split("H")[0])
    assert landed_top == charts.TOP
    assert promoted_top == (charts.TOP + charts.HEIGHT - charts.BOTTOM) / 2
    words = texts(root)
    assert "landings 4" in words and "promotions 2" in words and "ejections 1" in words
    assert root.find(f"{SVG}title") is not None
    assert int(root.attrib["width"]) > 0 and root.attrib["role"] == "img"


def test_the_histogram_bins_times_to_promotion_in_nice_widths() -> None:
    """Five times up to 125 s fall in 15-second bins (12 × 10 s cannot hold 125 s): nine
    bars (0–15 s holds one, 15–30 s two), up to the bin holding the longest."""
    root = parse(charts.histogram([5, 15, 25, 65, 125], label="Time to promotion"))
    assert charts.bin_width(125) == 15
    assert bars(root) == [1, 2, 0, 0, 1, 0, 0, 0, 1]
    titles = ["".join(t.itertext()) for r in root.iter(f"{SVG}rect") for t in r]
    assert titles[0] == "0s to 15s: 1" and titles[-1] == "2m 0s to 2m 15s: 1"
    assert "5 promoted, median 25s" in texts(root)
    heights = [float(r.attrib["height"]) for r in root.iter(f"{SVG}rect") if r.get("class")]
    assert max(heights) == charts.HEIGHT - charts.BOTTOM - charts.TOP and min(heights) == 0


def test_bins_stay_within_the_limit_for_any_time() -> None:
    for longest in (0.0, 0.5, 11.9, 12.0, 3599.0, 86400.0 * 7, 86400.0 * 400):
        width = charts.bin_width(longest)
        assert longest < width * charts.BINS or width % 86400 == 0
        root = parse(charts.histogram([0.0, longest], label="t"))
        assert 1 <= len(bars(root)) <= charts.BINS and sum(bars(root)) == 2


def test_hostile_names_are_shown_as_text() -> None:
    """A label holding markup, a terminal escape and a bidirectional override is drawn as
    those characters: no element is made from it, the controls are spelled out."""
    passages = [Passage("a", T0, promoted=T0 + 5)]
    for markup in (
        charts.flow(passages, label=HOSTILE, ident='x"><script>'),
        charts.histogram([5.0], label=HOSTILE),
        charts.flow([], label=HOSTILE),
    ):
        raw = str(markup)
        assert "<script>" not in raw and "\x1b" not in raw and "\u202e" not in raw
        root = parse(markup)
        title = root.find(f"{SVG}title")
        assert title is not None and title.text == visible(HOSTILE)
        assert visible(HOSTILE) in texts(root)


def test_empty_charts_say_there_is_nothing_yet() -> None:
    flow = parse(charts.flow([], label="Landings"))
    assert series(flow) == {} and "nothing landed yet" in texts(flow)
    latency = parse(charts.histogram([], label="Time"))
    assert bars(latency) == [] and "nothing promoted yet" in texts(latency)


def test_the_charts_draw_at_most_the_limit_and_say_so() -> None:
    """Past the cap only the newest landings are drawn (the path grows no further) and the
    chart says how many of how many; the default cap is the documented limit."""
    many = [Passage(str(i), T0 + i, promoted=T0 + i + 30) for i in range(50)]
    root = parse(charts.flow(many, label="Landings", limit=10))
    lines = series(root)
    assert int(lines["landed"].attrib["data-count"]) == 10
    assert lines["landed"].attrib["d"].count("V") == 10
    assert "the newest 10 of 50 landings" in texts(root)
    capped = parse(charts.histogram([float(i) for i in range(20)], label="Time", limit=5))
    assert sum(bars(capped)) == 5 and "the newest 5 of 20 promotions" in texts(capped)
    huge = [Passage(str(i), T0 + i) for i in range(CHART_LANDINGS + 500)]
    drawn = series(parse(charts.flow(huge, label="Landings")))
    assert drawn["landed"].attrib["data-count"] == str(CHART_LANDINGS)
    assert "the newest" not in "".join(texts(parse(charts.flow(many, label="Landings"))))
