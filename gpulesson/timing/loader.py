"""How fast a ``DataLoader`` feeds a training loop, by worker count, measured on the CPU.

A training step waits for its batch. With ``num_workers=0`` the main process loads
each batch itself, so loading and the step take turns; with workers, other processes
load the next batches while the step runs. This module times that with a dataset whose
items cost real CPU work (:class:`TokenizedText`: pure-Python tokenizing of a
generated text, the kind of work a collate or a tokenizer does per item) and a loop
whose "step" is a stand-in for the GPU: the host sleeps ``step_s`` per batch, as it
does while it waits for a GPU to finish.

Steps of :func:`measure_loader`:

1. time ``__getitem__`` alone in this process (:func:`measure_item`): seconds per item;
2. for each :class:`LoaderSetting`, build a ``DataLoader`` and run ``epochs`` epochs
   of the loop (fetch a batch, then sleep ``step_s``), reading the clock at every
   batch: the first batch of each epoch is kept apart (it includes starting the
   workers), the gaps between later batches are the samples (seconds per batch);
3. shut every worker down before the next setting (``persistent_workers`` ones too),
   so no process outlives the call.

Workers start with the platform's default method unless ``start_method`` is given
(``fork`` on Linux with Python 3.11: cheap, no re-import of torch; ``spawn`` on macOS
and Windows re-imports the program in each worker). Trade-off: a sleep is not a GPU;
it leaves the host's cores free exactly as waiting on a GPU does, but it copies
nothing, so pinned memory plays no part here (a CUDA build measures copies apart).

Used by the suite entry ``loader`` (``gpulesson/results/entries_feeding.py``), whose
measurements the lesson ``feeding.md`` reads back; rendered by
:mod:`gpulesson.course.feeding`.

>>> data = TokenizedText(items=8, words_per_item=20)
>>> ids = data[0]
>>> ids.dtype, ids.shape == (data.seq_len,), bool((ids[:5] > 0).all())
(torch.int64, True, True)
>>> run = measure_setting(data, LoaderSetting(num_workers=0), batch_size=4,
...                       batches_per_epoch=2, epochs=1, step_s=0.0)
>>> run.num_workers, len(run.first_batch_s), run.repeats
(0, 1, 1)
"""

from __future__ import annotations

import gc
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset

from gpulesson.timing.inputs import usable_cpus
from gpulesson.timing.results import Spread

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORD_RE = re.compile(r"\w+|[^\w\s]")
PAD_ID = 0
UNKNOWN_ID = 1
MAX_WORKERS = 64


class TokenizedText(Dataset):
    """Items that cost CPU work: generate a text, tokenize it greedily (WordPiece-style).

    Item ``i`` is ``words_per_item`` words drawn with ``random.Random(seed + i)`` from a
    fixed list, joined with punctuation, split with a regular expression and cut into
    the longest vocabulary pieces, left to right, in pure Python (each piece one
    dictionary lookup); the ids are padded or cut to ``seq_len``. The work per item
    grows with ``words_per_item``; nothing is cached between items.

    >>> data = TokenizedText(items=2, words_per_item=5, seq_len=16)
    >>> len(data), data[1].tolist() == data[1].tolist(), data[0].shape
    (2, True, torch.Size([16]))
    """

    def __init__(
        self, items: int = 512, words_per_item: int = 200, seq_len: int = 256, seed: int = 0
    ) -> None:
        for name, value in (("items", items), ("words_per_item", words_per_item)):
            if value < 1:
                raise ValueError(f"{name}={value}: use at least 1")
        if seq_len < 1:
            raise ValueError(f"seq_len={seq_len}: use at least 1 token per item")
        self.items = items
        self.words_per_item = words_per_item
        self.seq_len = seq_len
        self.seed = seed
        rng = random.Random(seed)
        self.words = tuple(
            "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 11))) for _ in range(400)
        )
        pieces = {w[:k] for w in self.words for k in range(1, 5)}
        pieces |= {
            "##" + w[i : i + k] for w in self.words for i in range(1, len(w)) for k in (1, 2)
        }
        pieces |= set(LETTERS) | {"##" + c for c in LETTERS} | {".", ","}
        self.vocab = {piece: i + 2 for i, piece in enumerate(sorted(pieces))}  # 0 pad, 1 unknown

    def __len__(self) -> int:
        return self.items

    def text(self, index: int) -> str:
        """The generated text of item ``index``."""
        rng = random.Random(self.seed + index)
        parts = []
        for _ in range(self.words_per_item):
            parts.append(rng.choice(self.words))
            if rng.random() < 0.1:
                parts.append(rng.choice(".,"))
        return " ".join(parts)

    def tokenize(self, text: str) -> list[int]:
        """Greedy longest-match pieces of every word: the ids, in order.

        >>> data = TokenizedText(items=1, words_per_item=1)
        >>> word = data.words[0]
        >>> pieces = [p for p, i in data.vocab.items() if i in data.tokenize(word)]
        >>> "".join(p.removeprefix("##") for p in sorted(pieces, key=len, reverse=True)) != ""
        True
        """
        ids: list[int] = []
        for word in WORD_RE.findall(text):
            start = 0
            while start < len(word):
                end = len(word)
                piece_id = None
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    piece_id = self.vocab.get(piece)
                    if piece_id is not None:
                        break
                    end -= 1
                if piece_id is None:
                    ids.append(UNKNOWN_ID)
                    break
                ids.append(piece_id)
                start = end
        return ids

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.items:
            raise IndexError(f"item {index} out of range 0..{self.items - 1}")
        ids = self.tokenize(self.text(index))[: self.seq_len]
        ids += [PAD_ID] * (self.seq_len - len(ids))
        return torch.tensor(ids, dtype=torch.int64)


@dataclass(frozen=True)
class LoaderSetting:
    """One ``DataLoader`` configuration to time.

    ``prefetch_factor`` None means the DataLoader's default (2 batches per worker when
    there are workers; it must be None without workers).

    >>> LoaderSetting(num_workers=2, persistent_workers=True).label
    '2 workers, prefetch 2, persistent'
    >>> LoaderSetting(num_workers=0, prefetch_factor=2)
    Traceback (most recent call last):
    ...
    ValueError: prefetch_factor=2 needs num_workers > 0: leave it None without workers
    """

    num_workers: int
    prefetch_factor: int | None = None
    persistent_workers: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.num_workers <= MAX_WORKERS:
            raise ValueError(
                f"num_workers={self.num_workers}: use 0 (load in the main process) "
                f"up to {MAX_WORKERS}"
            )
        if self.num_workers == 0 and (self.prefetch_factor is not None or self.persistent_workers):
            what = (
                f"prefetch_factor={self.prefetch_factor}"
                if self.prefetch_factor is not None
                else "persistent_workers=True"
            )
            raise ValueError(f"{what} needs num_workers > 0: leave it None without workers")
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise ValueError(f"prefetch_factor={self.prefetch_factor}: use 1 or more")

    @property
    def effective_prefetch(self) -> int | None:
        """Batches each worker loads ahead: the given factor, or the default 2; None without."""
        if self.num_workers == 0:
            return None
        return 2 if self.prefetch_factor is None else self.prefetch_factor

    @property
    def label(self) -> str:
        """The setting in words, for tables."""
        if self.num_workers == 0:
            return "0 workers (main process loads)"
        text = f"{self.num_workers} worker{'s' if self.num_workers > 1 else ''}"
        text += f", prefetch {self.effective_prefetch}"
        return text + (", persistent" if self.persistent_workers else "")


@dataclass(frozen=True)
class ItemTiming(Spread):
    """Seconds per ``__getitem__`` call, in the main process."""

    samples_s: tuple[float, ...]


@dataclass(frozen=True)
class LoaderRun(Spread):
    """One setting's loop: seconds per batch after the first, and each epoch's first batch.

    ``gaps_s`` are the raw readings: the time between consecutive batches after the
    first of each epoch (the step's sleep plus any wait for the next batch). Workers
    deliver in bursts (a batch each worker prefetched arrives at once), so a single gap
    says little: each epoch's mean gap is one sample (``samples_s``), and the rate is
    one over their median. ``first_batch_s`` is, per epoch, the time from asking for an
    iterator to the first batch: it includes starting workers that are not persistent.

    >>> run = LoaderRun(num_workers=0, prefetch_factor=None, persistent_workers=False,
    ...                 batch_size=8, batches_per_epoch=3, epochs=1, step_s=0.01,
    ...                 samples_s=(0.04,), gaps_s=(0.03, 0.05), first_batch_s=(0.03,),
    ...                 start_method="fork")
    >>> round(run.batches_per_s, 1), round(run.step_idle_share, 2)
    (25.0, 0.75)
    """

    num_workers: int
    prefetch_factor: int | None
    persistent_workers: bool
    batch_size: int
    batches_per_epoch: int
    epochs: int
    step_s: float
    samples_s: tuple[float, ...]
    gaps_s: tuple[float, ...]
    first_batch_s: tuple[float, ...]
    start_method: str | None

    @property
    def setting(self) -> LoaderSetting:
        """The setting this run measured."""
        return LoaderSetting(
            num_workers=self.num_workers,
            prefetch_factor=self.prefetch_factor,
            persistent_workers=self.persistent_workers,
        )

    @property
    def batches_per_s(self) -> float:
        """Steady-state batches per second: one over the median seconds per batch."""
        return 1.0 / self.median_s

    @property
    def step_idle_share(self) -> float:
        """Share of each batch's time the step (the GPU) was not running: waiting for data."""
        return max(0.0, 1.0 - self.step_s / self.median_s)

    @property
    def later_first_batch_s(self) -> float | None:
        """Median first-batch wait of the epochs after the first; None with one epoch."""
        later = self.first_batch_s[1:]
        return sorted(later)[len(later) // 2] if later else None


@dataclass(frozen=True)
class LoaderComparison:
    """Per-item work, then one :class:`LoaderRun` per setting, the first with no workers."""

    item: ItemTiming
    runs: tuple[LoaderRun, ...]
    items: int
    words_per_item: int
    cpus: int
    step_share: float  # the step as a share of one batch's load time in the main process

    @property
    def batch_load_s(self) -> float:
        """Seconds to load one batch in the main process: the item median times the batch."""
        return self.item.median_s * self.runs[0].batch_size

    def run(self, num_workers: int, persistent: bool = False) -> LoaderRun:
        """The run with ``num_workers`` workers (and persistence); ValueError if none."""
        for r in self.runs:
            if r.num_workers == num_workers and r.persistent_workers == persistent:
                return r
        measured = ", ".join(r.setting.label for r in self.runs)
        raise ValueError(
            f"no run with num_workers={num_workers}, persistent={persistent} (measured: "
            f"{measured}): add that LoaderSetting"
        )

    def speedup(self, run: LoaderRun) -> float:
        """How many times more batches per second than the run without workers."""
        return self.run(0).median_s / run.median_s

    @property
    def best(self) -> LoaderRun:
        """The run with the most batches per second."""
        return min(self.runs, key=lambda r: r.median_s)


def headline_figures(c: LoaderComparison) -> dict[str, tuple[float, str]]:
    """The figures the lesson's claims read, by name, with their units.

    Needs runs with 0, 1 and 2 workers and 2 persistent workers over two or more epochs
    (:data:`SETTINGS`).
    """
    none, one, two = c.run(0), c.run(1), c.run(2)
    kept = c.run(2, persistent=True)
    if two.later_first_batch_s is None or kept.later_first_batch_s is None:
        raise ValueError("headline figures need two or more epochs: set LoaderPlan(epochs=2)")
    return {
        "item_ms": (c.item.median_s * 1e3, "ms"),
        "batch_load_ms": (c.batch_load_s * 1e3, "ms"),
        "step_ms": (none.step_s * 1e3, "ms"),
        "idle_w0": (none.step_idle_share, "share"),
        "idle_best": (c.best.step_idle_share, "share"),
        "speedup_w1": (c.speedup(one), "x"),
        "speedup_w2": (c.speedup(two), "x"),
        "speedup_best": (c.speedup(c.best), "x"),
        "best_workers": (c.best.num_workers, "workers"),
        "best_per_s": (c.best.batches_per_s, "batches/s"),
        "ceiling_per_s": (1.0 / none.step_s, "batches/s"),
        "later_first_w2_ms": (two.later_first_batch_s * 1e3, "ms"),
        "later_first_kept_ms": (kept.later_first_batch_s * 1e3, "ms"),
    }


def measure_item(dataset: Dataset, repeats: int = 20) -> ItemTiming:
    """Time ``dataset[i]`` for ``repeats`` different items, one sample each.

    >>> measure_item(TokenizedText(items=4, words_per_item=10), repeats=4).repeats
    4
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: time at least one item")
    dataset[0]  # warm-up: first-call costs (regex cache, allocator) stay out
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        dataset[i % len(dataset)]
        samples.append(time.perf_counter() - start)
    return ItemTiming(samples_s=tuple(samples))


def measure_setting(
    dataset: Dataset,
    setting: LoaderSetting,
    batch_size: int,
    batches_per_epoch: int,
    epochs: int,
    step_s: float,
    start_method: str | None = None,
) -> LoaderRun:
    """Run ``epochs`` epochs of fetch-then-step with one setting; the clock read per batch."""
    if batch_size < 1 or batches_per_epoch < 2 or epochs < 1:
        raise ValueError(
            f"batch_size={batch_size}, batches_per_epoch={batches_per_epoch}, epochs={epochs}: "
            "use at least 1 item per batch, 2 batches per epoch (the gap between them is "
            "the sample) and 1 epoch"
        )
    if batch_size * batches_per_epoch > len(dataset):
        raise ValueError(
            f"{batches_per_epoch} batches of {batch_size} need {batch_size * batches_per_epoch} "
            f"items; the dataset has {len(dataset)}: use a larger dataset or fewer batches"
        )
    if step_s < 0:
        raise ValueError(f"step_s={step_s}: a step cannot take negative time")
    subset = torch.utils.data.Subset(dataset, range(batch_size * batches_per_epoch))
    loader = DataLoader(
        subset,
        batch_size=batch_size,
        num_workers=setting.num_workers,
        prefetch_factor=setting.prefetch_factor,
        persistent_workers=setting.persistent_workers,
        multiprocessing_context=start_method if setting.num_workers else None,
    )
    gaps: list[float] = []
    epoch_means: list[float] = []
    firsts: list[float] = []
    try:
        for _ in range(epochs):
            last = time.perf_counter()  # asking for the iterator starts non-persistent workers
            epoch_gaps = []
            for i, _batch in enumerate(loader):
                now = time.perf_counter()
                (firsts if i == 0 else epoch_gaps).append(now - last)
                last = now
                time.sleep(step_s)  # the stand-in for the GPU step
            gaps.extend(epoch_gaps)
            epoch_means.append(sum(epoch_gaps) / len(epoch_gaps))
    finally:
        # The last reference to the loader ends its workers, persistent ones included (the
        # iterator it keeps shuts them down when it is freed); collect any cycle now.
        del loader
        gc.collect()
    return LoaderRun(
        num_workers=setting.num_workers,
        prefetch_factor=setting.effective_prefetch,
        persistent_workers=setting.persistent_workers,
        batch_size=batch_size,
        batches_per_epoch=batches_per_epoch,
        epochs=epochs,
        step_s=step_s,
        samples_s=tuple(epoch_means),
        gaps_s=tuple(gaps),
        first_batch_s=tuple(firsts),
        start_method=start_method,
    )


# No workers first (the baseline every speedup is against), then one and two workers
# (this course's build machine has two cores), then two that persist across epochs.
SETTINGS = (
    LoaderSetting(num_workers=0),
    LoaderSetting(num_workers=1),
    LoaderSetting(num_workers=2),
    LoaderSetting(num_workers=2, persistent_workers=True),
)


@dataclass(frozen=True)
class LoaderPlan:
    """How big the loader measurement is: dataset, batches, epochs, and the step's length.

    ``step_share`` sets the stand-in step to that share of one batch's load time in the
    main process, so loading dominates (the case workers exist for) on any machine.
    """

    items: int = 64
    words_per_item: int = 200
    batch_size: int = 8
    batches_per_epoch: int = 8
    epochs: int = 2
    step_share: float = 1.5
    item_repeats: int = 16


def measure_loader(
    settings: Sequence[LoaderSetting] = SETTINGS,
    plan: LoaderPlan = LoaderPlan(),
    start_method: str | None = None,
) -> LoaderComparison:
    """Time per-item work, then every setting's loop; the first setting must have no workers.

    >>> plan = LoaderPlan(items=8, words_per_item=10, batch_size=2, batches_per_epoch=2,
    ...                   epochs=1, item_repeats=2)
    >>> result = measure_loader((LoaderSetting(num_workers=0),), plan)
    >>> result.speedup(result.runs[0])
    1.0
    """
    if not settings or settings[0].num_workers != 0:
        raise ValueError(
            "the first setting must be LoaderSetting(num_workers=0): every speedup is "
            "measured against loading in the main process"
        )
    if not 0 <= plan.step_share <= 10:
        raise ValueError(f"step_share={plan.step_share}: use 0 (no step) up to 10")
    dataset = TokenizedText(items=plan.items, words_per_item=plan.words_per_item)
    item = measure_item(dataset, plan.item_repeats)
    step_s = plan.step_share * item.median_s * plan.batch_size
    runs = tuple(
        measure_setting(
            dataset,
            setting,
            batch_size=plan.batch_size,
            batches_per_epoch=plan.batches_per_epoch,
            epochs=plan.epochs,
            step_s=step_s,
            start_method=start_method,
        )
        for setting in settings
    )
    return LoaderComparison(
        item=item,
        runs=runs,
        items=plan.items,
        words_per_item=plan.words_per_item,
        cpus=usable_cpus(),
        step_share=plan.step_share,
    )
