"""This build's own bundle: suite entries a block asks for run once and land in the site.

The worker side (:func:`build_bundle.measure`) runs a suite entry and keeps what it measured
with the block; the build side records it, fresh or replayed from the execution cache,
and writes ``build-bundle.json``, which validates and which ``gpulesson compare`` reads.
"""

from __future__ import annotations

import json
import logging
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpulesson import probe
from gpulesson.results import bundle as bundle_module
from gpulesson.site import build_bundle, exec_cache, facts
from tests.test_exec_cache import _convert, _runs, cache  # noqa: F401 (cache: a fixture)

REPO = Path(__file__).resolve().parents[1]
ENTRY = "launch_overhead"  # the cheapest entry that times something on a CPU (0.1 s)


@pytest.fixture
def fresh_build():
    build_bundle.reset()
    yield
    build_bundle.reset()


@pytest.fixture(scope="module")
def launch_row() -> bundle_module.Measurement:
    """The one row of ``build_bundle.measure(ENTRY, "cpu")`` in this process, for the tests
    that record and write a block's measurements: measured once, read, never changed."""
    (m,) = build_bundle.measure(ENTRY, "cpu")
    build_bundle.end_block()
    return m


def _measuring_page(counter: Path) -> str:
    return (
        '# P\n\n```python exec="on" id="launch"\n'
        "from gpulesson.site import build_bundle\n"
        f"open({str(counter)!r}, 'a').write('x')\n"
        f"(m,) = build_bundle.measure({ENTRY!r}, 'cpu')\n"
        'print(f"{m.name}: {m.spread.count} samples")\n```\n'
    )


@pytest.mark.usefixtures("cache", "fresh_build")
def test_a_block_measures_a_suite_entry_and_the_build_keeps_it_fresh_and_cached(tmp_path):
    counter = tmp_path / "runs"
    kept = []
    for _ in range(2):
        build_bundle.reset()
        facts.begin_page("p.md")
        html = _convert(_measuring_page(counter))
        assert "launch_overhead.eager:" in html
        (item,) = build_bundle.measured()
        assert (item.page, item.block_id, item.device, item.entry) == (
            "p.md",
            "launch",
            "cpu",
            ENTRY,
        )
        kept.append(item.measurements)
    assert _runs(counter) == 1  # the second build served the block from the cache...
    assert kept[0] == kept[1]  # ...and its measurements with it, unchanged


@pytest.mark.usefixtures("cache", "fresh_build")
def test_a_second_block_reads_the_first_block_s_figures_and_follows_them(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"

    def page(tag: str) -> str:
        return (
            _measuring_page(first).replace("# P\n\n", f"# P\n\n<!-- {tag} -->\n\n")
            + '\n```python exec="on" id="again"\n'
            "from gpulesson.site import build_bundle\n"
            f"open({str(second)!r}, 'a').write('x')\n"
            f"(m,) = build_bundle.measure({ENTRY!r}, 'cpu')\n"
            'print(f"again: {m.samples}")\n```\n'
        )

    def build(code_tag: str = "") -> str:
        build_bundle.reset()
        facts.begin_page("p.md")
        text = page("x")
        if code_tag:  # an edit to the first block's code: it measures anew
            text = text.replace("import build_bundle\n", f"import build_bundle  # {code_tag}\n", 1)
        return _convert(text)

    html = build()
    (item,) = build_bundle.measured()  # one entry, measured by the first block only
    assert item.block_id == "launch"
    assert f"again: {item.measurements[0].samples}" in html  # the same samples, not new ones
    build()
    assert (_runs(first), _runs(second)) == (1, 1)  # both from the cache
    build("edited")
    assert (_runs(first), _runs(second)) == (2, 2)  # new figures: the reader ran again


@pytest.mark.usefixtures("cache", "fresh_build")
def test_a_file_an_entry_makes_reaches_its_block_and_a_later_one_fresh_and_cached(tmp_path):
    counter = tmp_path / "runs"
    block = (
        '```python exec="on" id="{id}"\n'
        "import hashlib\n"
        "from gpulesson.site import build_bundle\n"
        "{count}"
        "rows = build_bundle.measure('profile_trace', 'cpu')\n"
        "(trace,) = build_bundle.attachments('profile_trace', 'cpu').values()\n"
        "size = next(m for m in rows if m.name == 'profile_trace.trace')\n"
        "print('{id}', hashlib.sha256(trace).hexdigest() == size.params['sha256'], size.value)\n"
        "```\n"
    )
    page = "# P\n\n" + block.format(id="first", count=f"open({str(counter)!r}, 'a').write('x')\n")
    page += "\n" + block.format(id="second", count="")
    seen = []
    for _ in range(2):
        build_bundle.reset()
        facts.begin_page("p.md")
        html = _convert(page)
        (item,) = build_bundle.measured()
        size = next(m for m in item.measurements if m.name == "profile_trace.trace")
        assert f"first True {size.value}" in html and f"second True {size.value}" in html
        seen.append(size.params["sha256"])
    assert _runs(counter) == 1 and seen[0] == seen[1]  # the second build: from the cache


def test_the_bundle_validates_names_this_machine_and_compare_reads_it(
    tmp_path, fresh_build, run_cli, launch_row
):
    data = {
        "device": "cpu",
        "entry": ENTRY,
        "wall_s": 0.2,
        "measurements": [bundle_module.measurement_to_dict(launch_row)],
        "skipped": [],
    }
    build_bundle.record("lessons/timing.md", "timing-launch", [data])
    report = probe.probe()
    assert build_bundle.write(tmp_path, report) == []
    written = bundle_module.load(tmp_path / build_bundle.BUNDLE_FILE)
    assert written.provenance.device_type == "cpu"
    assert written.provenance.device_name == report.cpu_model
    assert written.provenance.suite.entries == (ENTRY,)
    assert [m.name for m in written.measurements] == ["launch_overhead.eager"]
    result = run_cli("compare", str(tmp_path / build_bundle.BUNDLE_FILE))
    assert result.returncode == 0, result.stderr
    assert "launch overhead per tiny op, eager" in result.stdout


def test_an_entry_measured_by_a_second_block_is_a_build_error_naming_both(fresh_build, caplog):
    data = {"device": "cpu", "entry": ENTRY, "wall_s": 0.1, "measurements": [], "skipped": []}
    build_bundle.record("a.md", "first", [data])
    build_bundle.record("a.md", "first", [data])  # mkdocs serve rebuilt the page: replaced
    assert len(build_bundle.measured()) == 1
    with caplog.at_level(logging.ERROR):
        build_bundle.record("b.md", "second", [data])
    assert len(build_bundle.measured()) == 1
    assert "b.md: block 'second' measures suite entry 'launch_overhead' on cpu again" in (
        caplog.text
    )
    assert "block 'first' on a.md already did" in caplog.text


def test_a_bundle_that_does_not_validate_is_not_written_and_says_where(
    tmp_path, fresh_build, launch_row
):
    m = launch_row
    bad = bundle_module.measurement_to_dict(m) | {"value": max(m.samples) * 10}  # past them
    build_bundle.record(
        "p.md",
        "b",
        [{"device": "cpu", "entry": ENTRY, "wall_s": 0.1, "measurements": [bad], "skipped": []}],
    )
    (problem,) = build_bundle.write(tmp_path, probe.probe())
    assert problem.startswith("build-bundle.json: measurements[0].")
    assert not (tmp_path / build_bundle.BUNDLE_FILE).exists()


def test_a_rebuild_with_the_same_figures_skips_validation_and_a_changed_one_does_not(
    tmp_path, fresh_build, monkeypatch, launch_row
):
    """mkdocs serve writes the bundle on every rebuild: the same figures (only the time they
    were written differs) are validated once per process, changed figures every time."""
    m = launch_row
    good = bundle_module.measurement_to_dict(m)
    # as in a fresh process: another test may have written this row (the module's) already
    monkeypatch.setattr(build_bundle, "_valid", set())

    def record(row: dict) -> None:  # the same block again, as a rebuild records it
        entry = {"device": "cpu", "entry": ENTRY, "wall_s": 0.1, "skipped": []}
        build_bundle.record("p.md", "b", [entry | {"measurements": [row]}])

    validated = []
    original = bundle_module.validate
    monkeypatch.setattr(bundle_module, "validate", lambda d: validated.append(1) or original(d))
    report = probe.probe()
    record(good)
    assert build_bundle.write(tmp_path, report) == [] and len(validated) == 1
    record(good)
    assert build_bundle.write(tmp_path, report) == [] and len(validated) == 1
    written = json.loads((tmp_path / build_bundle.BUNDLE_FILE).read_text())
    assert written["measurements"] == [good]
    record(good | {"value": max(m.samples) * 10})  # a changed figure, past its samples
    (problem,) = build_bundle.write(tmp_path, report)
    assert len(validated) == 2 and problem.startswith("build-bundle.json: measurements[0].")


def test_writing_the_bundle_imports_no_torch_and_names_the_worker_s_thread_count(
    tmp_path, fresh_build, launch_row
):
    """The build's own process writes the bundle from what its worker reported (the probe, and
    torch's thread count where the suite ran), so it never imports torch itself."""
    m = launch_row
    block = {"device": "cpu", "entry": ENTRY, "wall_s": 0.1, "skipped": []}
    block["measurements"] = [bundle_module.measurement_to_dict(m)]
    worker_threads = torch.get_num_threads() + 3  # not the count this process would read
    (tmp_path / "report.pickle").write_bytes(pickle.dumps(probe.probe()))
    (tmp_path / "block.json").write_text(json.dumps(block))
    code = (
        "import json, pickle, sys\n"
        "from pathlib import Path\n"
        "from gpulesson.site import build_bundle\n"
        "here = Path(sys.argv[1])\n"
        "report = pickle.loads((here / 'report.pickle').read_bytes())\n"
        "build_bundle.record('p.md', 'b', [json.loads((here / 'block.json').read_text())])\n"
        f"print(build_bundle.write(here, report, {worker_threads}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["[]", "[]"], result.stdout[:500]
    written = bundle_module.load(tmp_path / build_bundle.BUNDLE_FILE)
    assert written.provenance.cpu_threads == worker_threads


def test_a_second_device_gets_its_own_file():
    assert build_bundle.file_name("cuda", ["cpu", "cuda"]) == "build-bundle.json"
    assert build_bundle.file_name("cpu", ["cpu", "cuda"]) == "build-bundle-cpu.json"
    assert build_bundle.file_name("cpu", ["cpu"]) == "build-bundle.json"


def test_unknown_entries_and_devices_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="use gpulesson measure --list"):
        build_bundle.measure("warp", "cpu")
    with pytest.raises(ValueError, match="is not one of cuda, mps, cpu"):
        build_bundle.measure(ENTRY, "tpu")
    with pytest.raises(ValueError, match="does not run on cpu: it needs"):
        build_bundle.measure("cuda_context", "cpu")
    build_bundle.end_block()


def test_a_cache_entry_without_its_measurements_is_damaged(tmp_path):
    store = exec_cache.ResultStore(tmp_path)
    key = "cd" * 32
    assert store.put(key, "out", 0.1, measured=[{"measurements": []}])
    assert store.get_entry(key).measured == [{"measurements": []}]
    path = store.path_for(key)
    entry = json.loads(path.read_text())
    del entry["measured"]
    path.write_text(json.dumps(entry))
    assert store.get_entry(key) is None
    # a file kept beside the measurements (a trace) that is not base64 text: damaged too
    assert store.put(key, "out", 0.1, measured=[{"measurements": [], "files": {"t": "AQI="}}])
    assert store.get_entry(key) is not None
    entry = json.loads(path.read_text())
    entry["measured"][0]["files"]["t"] = "%%"
    path.write_text(json.dumps(entry))
    assert store.get_entry(key) is None


def test_the_built_site_carries_this_build_s_bundle(built_site):
    record = json.loads((built_site / "build-record.json").read_text())
    bundle = bundle_module.load(built_site / build_bundle.BUNDLE_FILE)
    assert bundle.provenance.device_type == record["device_type"]
    assert bundle.provenance.cpu_model == record["cpu_model"]
    assert "decode" in bundle.provenance.suite.entries
    assert bundle.measurement("decode.b1") is not None


def test_gpu_figures_come_from_this_build_s_gpu_through_the_suite_else_a_reference(
    tmp_path, monkeypatch
):
    import shutil

    from gpulesson.site import gpu_figures

    fixtures = Path(__file__).parent / "fixtures" / "bundles"
    (tmp_path / "reference").mkdir()
    shutil.copy(fixtures / "fixture_h100.json", tmp_path / "reference" / "h100.json")
    asked = []
    monkeypatch.setattr(
        build_bundle, "measure", lambda entry, device: asked.append((entry, device)) or ()
    )
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: True)
    monkeypatch.setattr(build_bundle, "applies", lambda entry, device: entry == "decode")
    on_gpu = gpu_figures.gpu_measurements("decode", root=tmp_path)
    assert asked == [("decode", "cuda")] and on_gpu.ref is None and on_gpu.stamp() == ""
    assert on_gpu.machine == "this build's machine"
    one_gpu = gpu_figures.gpu_measurements("matmul", root=tmp_path)  # does not run here
    assert asked == [("decode", "cuda")] and one_gpu.ref is not None
    assert one_gpu.machine.startswith("the bundle's machine (")
    monkeypatch.setattr(gpu_figures, "build_has_gpu", lambda: False)
    from_ref = gpu_figures.gpu_measurements("matmul", root=tmp_path)
    assert from_ref.ref is not None and from_ref.ref.file == "h100.json"
    assert from_ref.measurements and {m.entry for m in from_ref.measurements} == {"matmul"}
    assert from_ref.stamp().startswith('!!! info "GPU figures from a reference result bundle')
    assert gpu_figures.gpu_measurements("no_such_entry", root=tmp_path) is None
    assert gpu_figures.gpu_measurements("matmul", root=tmp_path / "empty") is None


def test_a_full_bundle_of_this_machine_is_read_instead_of_measuring_again(
    tmp_path, run_cli, monkeypatch, fresh_build
):
    from gpulesson.results import suite

    out = tmp_path / "b.json"
    result = run_cli("measure", "--device", "cpu", "--only", ENTRY, "--out", str(out))
    assert result.returncode == 0, result.stderr
    saved = bundle_module.load(out)

    def refuse(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(suite, "run_suite", refuse)
    monkeypatch.setenv(build_bundle.REUSE_ENV, str(out))
    assert build_bundle.measure(ENTRY, "cpu") == saved.measurements
    (kept,) = build_bundle.end_block()
    assert kept["entry"] == ENTRY and len(kept["measurements"]) == len(saved.measurements)
    monkeypatch.undo()

    data = json.loads(out.read_text())
    for change in ({"quick": True}, {"device_name": "Another CPU"}):
        other = json.loads(json.dumps(data))
        if "quick" in change:
            other["provenance"]["suite"]["quick"] = True
        else:
            other["provenance"]["device_name"] = change["device_name"]
        path = tmp_path / "other.json"
        path.write_text(json.dumps(other))
        monkeypatch.setenv(build_bundle.REUSE_ENV, str(path))
        fresh = build_bundle.measure(ENTRY, "cpu")  # measured here: not this run's bundle
        assert fresh != saved.measurements
        build_bundle.end_block()
    # rows that name a file (a trace) the bundle cannot hold: measured here, with the file
    named = json.loads(json.dumps(data))
    named["measurements"][0]["params"][suite.ATTACHMENT_PARAM] = "trace.json.gz"
    path.write_text(json.dumps(named))
    assert build_bundle.measured_before(ENTRY, suite.Device.this("cpu"), str(path)) is None
    path.write_text("{}")
    with pytest.raises(ValueError, match=f"^{build_bundle.REUSE_ENV}: "):
        build_bundle.measure(ENTRY, "cpu")
    build_bundle.end_block()
