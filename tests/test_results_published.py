"""The results and compare pages with published rows and predictions beside the bundles.

Rendered from the package's ``published.json`` (or a temporary copy a test breaks) and from
fixture bundles placed in a temporary ``results/`` folder; nothing here reads the
repository's ``results/``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpulesson.results import datasheets, predict, published, published_render
from gpulesson.site import results_pages

FIXTURES = Path(__file__).parent / "fixtures" / "bundles"
PUBLISHED = Path(published.__file__).with_name(published.DATA_FILE)
LINK = re.compile(r'<a href="(https://[^"]+)">')
SPEC = re.compile(r'<script type="application/json" class="gl-chart-spec">(.*?)</script>')


@pytest.fixture
def empty_results(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    (tmp_path / "community").mkdir()
    return tmp_path


@pytest.fixture
def h100_results(empty_results: Path) -> Path:
    shutil.copy(FIXTURES / "fixture_h100.json", empty_results / "reference")
    return empty_results


def _published_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and LINK.search(line)]


def _specs(text: str) -> dict[str, dict]:
    specs = [json.loads(s) for s in SPEC.findall(text)]
    return {s["title"]: s for s in specs if s["title"].endswith(" across GPUs")}


def test_the_results_page_lists_every_published_row_with_its_link_and_retrieval_date(
    empty_results,
):
    text = results_pages.results_markdown(empty_results)
    rows = published.load()
    lines = _published_lines(text)
    assert len(lines) == len(rows) >= 30
    assert len({LINK.search(line)[1] for line in lines}) == len(published.publications()) >= 3
    figures = dict.fromkeys(r.figure for r in rows)
    in_page_order = [r for figure in figures for r in rows if r.figure == figure]
    for line, row in zip(lines, in_page_order, strict=True):
        assert row.source in line and f"| {row.retrieved.isoformat()} |" in line
        assert "| published |" in line  # told apart from the bundles' figures
    assert "No result bundles yet" in text  # and still says no bundle of ours exists


def test_published_rows_are_grouped_under_their_figure(empty_results):
    text = results_pages.results_markdown(empty_results)
    sections = re.split(r"^#### ", text, flags=re.M)[1:]
    counted = {s.split("\n", 1)[0]: len(_published_lines(s)) for s in sections}
    by_figure: dict[str, int] = {}
    for r in published.load():
        by_figure[r.figure] = by_figure.get(r.figure, 0) + 1
    assert counted == by_figure


def test_each_published_row_has_its_device_s_prediction_and_the_ratio_or_no_model(empty_results):
    lines = _published_lines(results_pages.results_markdown(empty_results))
    h100 = next(line for line in lines if "H100 SXM5" in line and "| 794 |" in line)
    predicted = predict.predict_for("h100-sxm", "matmul_peak.bf16")
    assert f"| {predicted.value / 1e12:,.0f} (upper bound) |" in h100  # 990 TFLOPS
    assert f"| {794.5e12 / predicted.value:.2f}x |" in h100  # 0.80x
    gaudi = next(line for line in lines if line.startswith("| Intel Gaudi 2 |"))
    assert "| no model (no datasheet row) | — |" in gaudi
    stream = next(line for line in lines if "stream.triad" not in line and "| 1,832 |" in line)
    assert "| no model | — |" in stream  # a datasheet GPU, but no model for a STREAM triad


def test_a_bundle_s_measurement_appears_on_the_chart_across_gpus(tmp_path, h100_results):
    before = _specs(results_pages.results_markdown(tmp_path / "no-results"))
    after = _specs(results_pages.results_markdown(h100_results))
    assert len(after) == len(published_render.CHART_FIGURES) == 4
    chart = after["matmul_peak.bf16 across GPUs"]
    h100 = {
        p["kind"]: p["value"]
        for p in chart["data"]["values"]
        if p["device"] == datasheets.get("h100-sxm").name
    }
    assert h100 == {"predicted": 989.5e12, "published": 794.5e12, "measured": 700e12}
    assert not any(
        p["kind"] == "measured" for p in before["matmul_peak.bf16 across GPUs"]["data"]["values"]
    )
    label = "NVIDIA H100 SXM5 80GB: predicted 990 TFLOP/s, published 794 TFLOP/s, measured 700"
    assert label in chart["description"]


def test_the_chart_s_marks_tell_the_three_kinds_apart():
    spec = published_render.across_chart("memory_bandwidth", published.load())
    colour, shape = spec["encoding"]["color"]["scale"], spec["encoding"]["shape"]["scale"]
    assert colour["domain"] == shape["domain"] == ["predicted", "published", "measured"]
    assert len(set(colour["range"])) == len(set(shape["range"])) == 3
    a100 = datasheets.get("a100-80gb").name
    assert f"{a100}: predicted 2,039 GB/s, published 1,818 GB/s" in spec["description"]


def _broken_copy(tmp_path: Path, change) -> Path:
    data = json.loads(PUBLISHED.read_text())
    change(data["rows"])
    path = tmp_path / "published.json"
    path.write_text(json.dumps(data))
    return path


def test_an_unsourced_row_fails_the_page_naming_file_row_and_field(empty_results, tmp_path):
    path = _broken_copy(tmp_path, lambda rows: rows[2].pop("source"))
    with pytest.raises(ValueError, match=r"published\.json: rows: 3 \(NVIDIA GH200 SXM, "):
        results_pages.results_markdown(empty_results, published_file=path)
    with pytest.raises(ValueError, match=r"rows: 3 .*: source: missing; add it"):
        results_pages.compare_html(empty_results, published_file=path)


def test_a_malformed_row_fails_the_page_naming_its_field(empty_results, tmp_path):
    def plain_http(rows):
        rows[4]["source"] = "http://example.invalid/table"

    path = _broken_copy(tmp_path, plain_http)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: rows: 5 .*: source: must be"):
        results_pages.results_markdown(empty_results, published_file=path)
    path = _broken_copy(tmp_path, lambda rows: rows[0].update(value="fast"))
    with pytest.raises(ValueError, match=r"rows: 1 \(Intel Gaudi 2, .*\): value: must be"):
        results_pages.results_markdown(empty_results, published_file=path)


def test_a_hostile_published_row_is_plain_text_and_its_link_stays_one_attribute(tmp_path):
    def hostile(rows):
        rows[0].update(
            device='<img src=x onerror="alert(1)">',
            publisher="*me* [x](javascript:alert(1))",
            source='https://example.invalid/"onmouseover="alert(1)',
        )

    rows = published_render.load_rows(_broken_copy(tmp_path, hostile))
    text = published_render.published_markdown(rows)
    assert "<img" not in text and "&lt;img" in text
    assert '<a href="https://example.invalid/&quot;onmouseover=&quot;alert(1)">' in text
    assert "\\*me\\* \\[x\\](javascript:alert(1))" in text


def test_compare_data_holds_what_the_script_looks_up(empty_results):
    html = results_pages.compare_html(empty_results)
    payload = re.search(r'<script type="application/json" id="gl-compare-data">(.*)</script>', html)
    data = json.loads(payload.group(1))
    assert data["references"] == []  # no bundle of ours
    assert len(data["published"]) == len(published.load())
    p = data["predictions"]["h100-sxm"]["matmul_peak.bf16"]
    expected = predict.predict_for("h100-sxm", "matmul_peak.bf16")
    assert (p["value"], p["unit"], p["arithmetic"]) == (
        expected.value,
        "FLOP/s",
        expected.arithmetic,
    )
    assert "reason" in data["predictions"]["t4"]["matmul_peak.bf16"]  # the T4 states no bf16
    for row in datasheets.all_rows():
        assert data["name_keys"][row.id]["patterns"] == list(row.name_patterns)
    own = data["published_for"]["h100-sxm"]["matmul_peak.bf16"]
    assert own["same"] and [data["published"][i]["value"] for i in own["rows"]] == [794.5]
    # the A100 80GB has no published bf16 MAMF row: the nearest GPU's by bandwidth stands in
    near = data["published_for"]["a100-80gb"]["matmul_peak.bf16"]
    assert (near["device"], near["same"]) == ("h100-sxm", False)
    assert data["kind_colours"]["measured"] == "var(--gl-chart-reader)"
    assert '<div class="gl-compare-published"></div>' in html


def test_the_nearest_published_gpu_is_the_closest_in_memory_bandwidth():
    data = published_render.compare_published_data(published.load())
    candidates = {r.device for r in published.load() if r.figure == "matmul_peak.fp8"}
    candidates &= set(datasheets.ids())
    for device, figures in data["published_for"].items():
        chosen = figures["matmul_peak.fp8"]["device"]
        if device in candidates:
            assert chosen == device
            continue
        own = datasheets.get(device).memory_bandwidth_bytes_per_s
        gaps = {
            c: max(own, datasheets.get(c).memory_bandwidth_bytes_per_s)
            / min(own, datasheets.get(c).memory_bandwidth_bytes_per_s)
            for c in candidates
        }
        assert gaps[chosen] == min(gaps.values()), device
