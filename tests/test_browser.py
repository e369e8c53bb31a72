"""The built site in headless Chromium: pages, labs, quizzes, flashcards, accessibility.

Skipped, with the reason, when no Chromium is found (CHROMIUM or /usr/bin/chromium) or
Python Playwright is missing; .ci/run installs Chromium so these run in CI.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from gpulesson.memory import cost, planner
from gpulesson.site import labs
from gpulesson.timing import race as race_sim
from gpulesson.timing import teaching

CHROMIUM = os.environ.get("CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
)
if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip(
        "no Chromium: set CHROMIUM or install /usr/bin/chromium (.ci/run does)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="Python Playwright is not installed")

LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERIOUS = ("serious", "critical")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def site_url(built_site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


class _Watched:
    """A page with its console errors, page errors and outside requests recorded."""

    def __init__(self, browser: object, scheme: str = "light") -> None:
        self.context = browser.new_context(color_scheme=scheme)  # type: ignore[attr-defined]
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._request)

    def _request(self, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        host = urlparse(url).hostname
        if url.startswith(("data:", "blob:", "about:")):
            return
        if host != "127.0.0.1":
            self.outside.append(url)

    def open(self, url: str) -> object:
        """Load the page and wait until its labs, quiz and flashcards have their data."""
        response = self.page.goto(url)
        assert response is not None and response.ok, f"{url}: {response and response.status}"
        self.page.wait_for_function(
            "() => [...document.querySelectorAll("
            "'.gl-lab[data-lab], .gl-quiz, .gl-flashcards')].every(b => b.dataset.ready === '2')"
        )
        return self.page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def watched(browser: object) -> Iterator[_Watched]:
    w = _Watched(browser)
    yield w
    w.close()


def _pages(site: Path) -> list[str]:
    return sorted(
        str(p.parent.relative_to(site)).replace(".", "") + "/"
        for p in site.rglob("index.html")
        if "assets" not in p.parts
    )


@dataclass(frozen=True)
class _PageVisit:
    """One page opened and scanned by axe: what it logged, what it asked for, what it shows."""

    path: str
    errors: tuple[str, ...]  # console and page errors while it was open
    outside: tuple[str, ...]  # requests to any host but 127.0.0.1
    serious: tuple[str, ...]  # axe violations of serious or critical impact
    kinds: frozenset[str]  # element names and classes in the rendered article


_AXE = "async () => await axe.run(document, {resultTypes: ['violations']})"
_KINDS = """() => [...(document.querySelector('article') || document.body).querySelectorAll('*')]
    .flatMap(e => [e.localName, ...[...e.classList].map(c => '.' + c)])"""


def _scan(browser: object, site_url: str, paths: list[str], scheme: str) -> list[_PageVisit]:
    """Open each page in ``scheme``: what it logged and requested, what it renders, and axe."""
    axe = _axe_script().read_text(encoding="utf-8")
    w = _Watched(browser, scheme)
    visits = []
    try:
        for path in paths:
            page = w.open(site_url + path.lstrip("/"))
            kinds = frozenset(page.evaluate(_KINDS))
            # Evaluated, not added as an inline <script>: the pages' Content-Security-Policy
            # blocks inline scripts (gpulesson/site/csp_hook.py).
            page.evaluate(axe)
            serious = tuple(
                f"{path}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes']][:3]}"
                for v in page.evaluate(_AXE)["violations"]
                if v["impact"] in SERIOUS
            )
            # Read after the scan: the page has been open for it, so a late request counts.
            errors, outside = tuple(w.errors), tuple(w.outside)
            visits.append(_PageVisit(path, errors, outside, serious, kinds))
            w.errors.clear()
            w.outside.clear()
    finally:
        w.close()
    return visits


@pytest.fixture(scope="module")
def light_pass(built_site: Path, site_url: str, browser: object) -> list[_PageVisit]:
    """Every page opened once, in the light scheme: what it logged and requested, and axe."""
    return _scan(browser, site_url, _pages(built_site), "light")


def test_every_page_loads_cleanly_and_stays_local(light_pass: list[_PageVisit]):
    assert "lessons/where-to-run/" in [visit.path for visit in light_pass]
    assert [f"{v.path}: {e}" for v in light_pass for e in v.errors] == []
    assert [url for v in light_pass for url in v.outside] == []


def _out(page: object, box: str, name: str) -> float:
    return float(page.get_attribute(f'{box} [data-out="{name}"]', "data-value"))  # type: ignore[attr-defined]


def test_throughput_race_matches_the_package(site_url: str, watched):
    lesson = "lessons/why-gpus/"
    if not _exists(site_url + lesson):
        pytest.skip("the throughput race's lesson (why-gpus) is not in this build yet")
    page = watched.open(site_url + lesson)
    box = '.gl-lab[data-lab="race"]'
    # the CPU runs at the rate this build's sweep measured, which the page's table used too
    cpu_rate = float(page.get_attribute(box, "data-cpu-flop-per-s"))
    assert cpu_rate != race_sim.TEACHING_CPU_FLOP_PER_S
    for log2n in ("3", "6", "9", "12.25"):
        page.fill(f'{box} input[type="range"]', log2n)
        n = int(_out(page, box, "n"))
        expected = race_sim.race(n, cpu_flop_per_s=cpu_rate)
        assert _out(page, box, "cpu") == pytest.approx(expected.cpu_s)
        assert _out(page, box, "gpu") == pytest.approx(expected.gpu_s)
    page.fill(f'{box} input[type="range"]', "4")  # n = 16: the launch outweighs the work
    assert "CPU wins" in page.inner_text(f'{box} [data-out="winner"]')
    page.fill(f'{box} input[type="range"]', "8")  # n = 256: a microsecond launch is paid off
    assert "GPU wins" in page.inner_text(f'{box} [data-out="winner"]')


def _exists(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except urllib.error.URLError:
        return False


def test_cost_calculator_responds_and_matches_the_package(site_url: str, watched):
    page = watched.open(site_url + "lessons/where-to-run/")
    box = '.gl-lab[data-lab="cost"]'
    page.select_option(f"{box} select", "2")
    page.fill(f'{box} [data-in="hours"]', "4")
    page.fill(f'{box} [data-in="runs"]', "20")
    rate = cost.card_rates()[2]
    assert _out(page, box, "on-demand") == pytest.approx(
        cost.run_cost_usd(rate.on_demand_usd_per_h, 4, 20)
    )
    assert _out(page, box, "spot") == pytest.approx(cost.run_cost_usd(rate.spot_usd_per_h, 4, 20))
    page.fill(f'{box} [data-in="on-rate"]', "2.5")
    assert _out(page, box, "on-demand") == pytest.approx(2.5 * 4 * 20)


def test_dispatch_simulator_steps_through_each_machine(site_url: str, watched):
    page = watched.open(site_url + "lessons/software-stack/")
    box = '.gl-lab[data-lab="dispatch"]'
    next_button = page.get_by_role("button", name="Run next line")
    for machine, line in (("nvidia", "cuda:0"), ("mac", "Torch not compiled with CUDA")):
        page.check(f'{box} [data-in="machine-{machine}"]')
        page.get_by_role("button", name="Start over").click()
        for _ in labs.dispatch_script():
            next_button.click()
        console = page.inner_text(f'{box} [data-out="console"]')
        assert line in console
        assert console.count(">>>") == len(labs.dispatch_script())
    assert next_button.is_disabled()


def test_timing_lab_shows_the_illusion_and_the_honest_number(site_url: str, watched):
    lesson = "lessons/timing/"
    if not _exists(site_url + lesson):
        pytest.skip("the timing lesson is not in this build yet")
    page = watched.open(site_url + lesson)
    box = '.gl-lab[data-lab="timing"]'
    if page.get_attribute(box, "data-measured"):
        pytest.skip("this site was built on a GPU: the lab shows measured numbers")
    label = page.inner_text(f"{box} .gl-badge")  # where each teaching figure comes from
    kernel_ms = teaching.TEACHING.kernel_s * 1e3
    assert f"kernel {kernel_ms:.2f} ms ({teaching.kernel_basis()})" in label, label
    assert f"CPU {teaching.TEACHING.cpu_s:g} s (the source's example)" in label, label
    figures = label.replace(teaching.kernel_basis(), "")
    assert label.endswith("Not a measurement.") and not re.search(r"\d{5,}", figures), label
    for sync in (False, True):
        page.set_checked(f'{box} [data-in="sync"]', sync)
        page.get_by_role("button", name="Time the matmul").click()
        page.wait_for_selector(f'{box} [data-out="claim"][data-value]', timeout=5000)
        expected = teaching.stopwatch(sync)
        assert _out(page, box, "stopwatch") == pytest.approx(expected.measured_s)
        assert _out(page, box, "claim") == pytest.approx(expected.claimed_speedup)
        page.evaluate(
            f"document.querySelector('{box} [data-out=\"claim\"]').removeAttribute('data-value')"
        )


def test_quiz_scores_and_explains_every_option(site_url: str, watched):
    """The quiz at the end and its predict-then-reveal question, placed before the block
    that computes the answer, share one score."""
    page = watched.open(site_url + "lessons/where-to-run/")
    quiz = '.gl-quiz:not([data-predict])[data-quiz="where-to-run"]'
    predict = '.gl-quiz[data-predict="where-cost-table"]'
    questions = json.loads(page.get_attribute(quiz, "data-questions"))
    (prediction,) = json.loads(page.get_attribute(predict, "data-questions"))
    total = len(questions) + 1
    right = [o["correct"] for o in questions[0]["options"]].index(True)
    wrong = [o["correct"] for o in questions[1]["options"]].index(False)
    predicted_right = [o["correct"] for o in prediction["options"]].index(True)
    assert page.is_hidden(".gl-quiz-static")
    # the prediction stands right before the cost table its block prints, the quiz after it
    assert page.evaluate(
        """([p, q]) => {
        const before = document.querySelector(p), after = document.querySelector(q);
        const later = (a, b) => a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING;
        const next = [...document.querySelectorAll("article table")].find(t => later(before, t));
        return next.innerText.includes("same on spot") && !!later(next, after);
        }""",
        [predict, quiz],
    )
    moved = page.locator(f"{predict} .gl-question")
    assert moved.locator(".gl-qnum").inner_text().startswith("Predict")
    assert not moved.locator(".gl-why").first.is_visible()  # the reveal waits for an answer
    moved.locator(".gl-option").nth(predicted_right).click()
    assert moved.locator(".gl-why").nth(predicted_right).is_visible()
    assert page.inner_text(f'{quiz} [data-out="score"]').startswith(
        f"1 / {total} answered · 1 correct"
    )
    first = page.locator(f"{quiz} .gl-question").first
    assert not first.locator(".gl-why").first.is_visible()  # no spoilers before answering
    first.locator(".gl-option").nth(right).click()
    first.locator(".gl-option").nth((right + 1) % 2).click()  # a second click does not count
    score = page.inner_text(f'{quiz} [data-out="score"]')
    assert score.startswith(f"2 / {total} answered · 2 correct")
    whys = first.locator(".gl-why")
    assert all(whys.nth(i).is_visible() for i in range(whys.count()))
    second = page.locator(f"{quiz} .gl-question").nth(1)
    second.locator(".gl-option").nth(wrong).click()
    assert page.inner_text(f'{quiz} [data-out="score"]').startswith(
        f"3 / {total} answered · 2 correct"
    )


def test_quiz_code_spans_are_code_not_backticks(site_url: str, watched):
    page = watched.open(site_url + "lessons/cuda-errors/")
    quiz = ".gl-quiz:not([data-predict])"
    prompts = [q["prompt"] for q in json.loads(page.get_attribute(quiz, "data-questions"))]
    with_code = [i for i, prompt in enumerate(prompts) if "`" in prompt]
    assert with_code, "the cuda-errors quiz quotes an error message in a prompt"
    legend = page.locator(f"{quiz} .gl-question legend").nth(with_code[0])
    assert legend.locator("code").count() >= 1 and "`" not in legend.inner_text()


def test_flashcards_flip_with_the_keyboard(site_url: str, watched):
    page = watched.open(site_url + "flashcards/")
    card = page.locator('.gl-card[data-term="MIG"]')
    assert "Splits a GPU" in card.inner_text()
    card.focus()
    page.keyboard.press("Enter")
    assert card.get_attribute("aria-pressed") == "true"
    assert "fixed slice of SMs" in card.inner_text()
    assert page.is_hidden(".gl-cards-static")


PLANNER_GRID = [
    # (billions of parameters, recipe, batch, sequence, checkpointing, attention, model shape)
    (0.5, "fp16-fp32-grads", 1, 512, False, "sdpa", {}),
    (7, "amp", 1, 512, False, "sdpa", {}),
    (7, "fp16-fp32-grads", 1, 512, False, "eager", {}),
    (7, "bf16", 4, 2048, True, "sdpa", {}),
    (7, "mixed-fp32-master", 2, 1024, False, "sdpa", {}),
    (1.5, "sgd", 8, 256, False, "eager", {}),
    (13, "infer-fp16", 1, 512, False, "sdpa", {}),
    (7, "qlora", 1, 2048, True, "sdpa", {}),
    (7, "lora", 2, 512, False, "sdpa", {}),
    (70, "infer-4bit", 1, 512, False, "sdpa", {}),
    (3, "fp32", 1, 128, True, "sdpa", {}),
    (0.1, "fp32", 16, 1024, False, "sdpa", {"vocab": 50257, "hidden": 768, "heads": 12}),
    (0.1, "bf16-pure", 8, 1024, True, "eager", {"vocab": 50257, "hidden": 768, "layers": 12}),
]
PLANNER_DEFAULT_SHAPE = {"vocab": 32000, "hidden": 4096, "heads": 32, "layers": 32}
PLANNER_OUTPUTS = (
    ("weights", "weights"),
    ("master", "master weights"),
    ("optimizer", "optimizer state"),
    ("gradients", "gradients"),
    ("activations", "activations"),
    ("temporaries", "temporaries"),
    ("kv_cache", "KV cache"),
)


def test_planner_matches_gpulesson_budget(site_url: str, watched):
    """The widget, driven like a reader, against planner.plan and budget.estimate on each input."""
    from gpulesson.memory import budget

    page = watched.open(site_url + "lessons/budget/")
    box = '.gl-lab[data-lab="planner"]'
    assert page.input_value(f'{box} [data-in="recipe"]') == "amp"  # the training default
    for billions, recipe, batch, seq, ckpt, attention, dims in PLANNER_GRID:
        shape = {**PLANNER_DEFAULT_SHAPE, **dims}
        if dims.get("hidden") == 768:
            shape.setdefault("layers", 12)
        page.select_option(f'{box} [data-in="recipe"]', recipe)
        page.select_option(f'{box} [data-in="attention"]', attention)
        page.fill(f'{box} [data-in="params"]', str(billions))
        page.fill(f'{box} [data-in="batch"]', str(batch))
        page.fill(f'{box} [data-in="sequence"]', str(seq))
        for name, value in shape.items():
            page.fill(f'{box} [data-in="{name}"]', str(value))
        page.set_checked(f'{box} [data-in="checkpointing"]', ckpt)
        x = planner.PlannerInputs(
            params=billions * 1e9,
            recipe=recipe,
            batch=batch,
            sequence=seq,
            attention=attention,
            checkpointing="full" if ckpt else "none",
            **shape,
        )
        want = planner.plan(x)
        ref = budget.estimate(
            x.params,
            preset=recipe,
            shape=budget.TransformerShape(
                vocab=x.vocab, seq=seq, hidden=x.hidden, heads=x.heads, layers=x.layers, batch=batch
            ),
            attention=attention,
            checkpointing=x.checkpointing,
        )
        alive = next(p for p in ref.phases if p.name == ref.peak_phase).alive_bytes
        for key, line in PLANNER_OUTPUTS:
            shown = _out(page, box, key)
            assert shown == getattr(want, f"{key}_bytes"), (recipe, key)
            assert shown == alive.get(line, 0), (recipe, key)
        assert _out(page, box, "total") == want.total_bytes == ref.total_bytes
        assert _out(page, box, "needed") == ref.with_headroom_bytes
        assert page.get_attribute(f'{box} [data-out="phase"]', "data-value") == ref.peak_phase
        shown_fits = [
            page.get_attribute(f'{box} [data-card="{c.card_bytes}"]', "data-fits") == "yes"
            for c in want.fits
        ]
        assert shown_fits == [budget.fits(ref, c.card_bytes).fits for c in want.fits], recipe


def _axe_script() -> Path:
    axe = pytest.importorskip("axe_playwright_python", reason="axe-playwright-python missing")
    return Path(axe.__file__).parent / "axe.min.js"


def _sample(visits: list[_PageVisit]) -> list[str]:
    """Few pages that together hold every element and class any page renders.

    Greedy: the page with the most kinds not yet covered, the first in order on a tie.

    >>> a = _PageVisit("a/", (), (), (), frozenset({"p", ".x"}))
    >>> b = _PageVisit("b/", (), (), (), frozenset({"p", ".x", ".y"}))
    >>> _sample([a, b])
    ['b/']
    """
    left = frozenset().union(*(v.kinds for v in visits))
    chosen = []
    while left:
        best = max(visits, key=lambda v: len(v.kinds & left))
        chosen.append(best.path)
        left -= best.kinds
    return chosen


def test_no_serious_accessibility_violations_in_the_light_scheme(light_pass: list[_PageVisit]):
    """axe on every page, in the light scheme (the same visit as the load test)."""
    assert [found for visit in light_pass for found in visit.serious] == []


def test_no_serious_accessibility_violations_in_the_dark_scheme(
    light_pass: list[_PageVisit], site_url: str, browser: object
):
    """axe in the dark scheme on a sample that renders every element and class of the site."""
    sample = _sample(light_pass)
    assert 0 < len(sample) < len(light_pass)
    found = [f for visit in _scan(browser, site_url, sample, "dark") for f in visit.serious]
    assert found == [], f"dark scheme, sample {sample}"


def test_a_check_mark_shows_its_rule_on_hover_and_leads_to_the_page_s_checks(
    site_url: str, watched
):
    page = watched.open(site_url + "lessons/timing/")
    mark = page.locator("a.gl-claim-holds").first
    mark.hover()
    title = mark.get_attribute("title") or ""
    assert title.startswith("Checked at build: ") and " with " in title
    assert "(checked on this build)" not in page.inner_text("article")
    assert page.locator("details#gl-checks").get_attribute("open") is None  # collapsed
    mark.click()
    page.evaluate("document.querySelector('details#gl-checks').open = true")
    entry = page.locator(mark.get_attribute("href") or "")
    assert entry.is_visible() and "holds" in entry.inner_text()
    assert "Rule " in entry.inner_text() and "flips with" in entry.inner_text()
    assert watched.errors == []
