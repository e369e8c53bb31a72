"""Numbers for quiz questions that ask the reader to predict a figure the page computes.

A templated question in ``docs/lessons/<stem>.quiz.yml`` names the facts it
reads and one function here (``values: gpulesson.site.quiz_values:decades``).
The function takes ``{fact name: value}`` and returns the named values that the
question's prompt, options and reasons put in ``{placeholders}``: the
arithmetic lives here, the words in the YAML. Such a question stands before the
block that computes its answer (``before:``), so the page asks first and shows the
number after. Each function must keep the
options apart whatever the facts are (:func:`gpulesson.site.quizzes.fill`
refuses two options that read the same).

>>> decades({"timing.inflation": 1.18})["value"]
'1.2'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def about(x: float, figures: int = 2) -> str:
    """``x`` rounded to ``figures`` significant figures, with thousands separators.

    >>> about(1234.5), about(0.1183), about(9.96), about(1234.5, 3)
    ('1,200', '0.12', '10', '1,230')
    """
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{x!r} is not a positive number: publish the fact as one")
    rounded = float(f"{x:.{figures}g}")
    decimals = max(0, figures - 1 - math.floor(math.log10(rounded)))
    return f"{rounded:,.{decimals}f}"


def decades(facts: Mapping[str, Any]) -> dict[str, str]:
    """The one fact's value to two figures, and values ten times smaller, larger and 100x larger.

    The four always read differently, so a question can offer them as options
    and ask the reader for the order of magnitude. ``measured`` is the value to
    three figures, for the explanations.

    >>> decades({"timing.inflation": 812.7})
    {'value': '810', 'tenth': '81', 'tenfold': '8,100', 'hundredfold': '81,000', 'measured': '813'}
    >>> decades({"a": 1, "b": 2})
    Traceback (most recent call last):
    ...
    ValueError: decades reads exactly one fact, got 2 (a, b): list one under facts
    """
    if len(facts) != 1:
        raise ValueError(
            f"decades reads exactly one fact, got {len(facts)} ({', '.join(facts)}): "
            "list one under facts"
        )
    (x,) = facts.values()
    return {
        "value": about(x),
        "tenth": about(x / 10),
        "tenfold": about(x * 10),
        "hundredfold": about(x * 100),
        "measured": about(x, 3),
    }


def gb_gib_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """A byte count read four ways: GB (right), GiB read as GB, and two mixed-up conversions.

    Reads one fact, a memory size in bytes. ``gb`` divides by 10^9 (right for GB);
    ``gib`` by 2^30 (the same bytes in GiB, the number a reader mistakes for GB);
    ``wrong_way`` applies the GB/GiB factor backwards; ``mixed`` divides by 2^20 and then
    by 1000 (MiB counted as if a thousand made a GB). Three significant figures keep the
    four apart (the closest pair differs by 2.4%). ``bytes`` is the count, separated.

    >>> r = gb_gib_readings({"stack.card_bytes": 24 * 2**30})
    >>> r["gb"], r["gib"], r["wrong_way"], r["mixed"], r["bytes"]
    ('25.8', '24.0', '22.4', '24.6', '25,769,803,776')
    """
    if len(facts) != 1:
        raise ValueError(
            f"gb_gib_readings reads exactly one fact (a size in bytes), got {len(facts)}: "
            "list one under facts"
        )
    (n_bytes,) = facts.values()
    gib = n_bytes / 2**30
    return {
        "gb": about(n_bytes / 1e9, 3),
        "gib": about(gib, 3),
        "wrong_way": about(gib / (2**30 / 1e9), 3),
        "mixed": about(n_bytes / 2**20 / 1000, 3),
        "bytes": f"{int(n_bytes):,}",
    }


SWEEP_BILL_FACTS = (
    "where.spot_usd_per_h",
    "where.on_demand_usd_per_h",
    "where.hours_per_run",
    "where.runs",
)


def sweep_bill(facts: Mapping[str, Any]) -> dict[str, str]:
    """A sweep's spot bill, and the three sums a hurried reader gets instead.

    Reads the spot and on-demand rates ($/h), the hours per run and the number of runs
    (``SWEEP_BILL_FACTS``). ``spot`` is rate x hours x runs on spot (right);
    ``on_demand`` the same at the on-demand rate; ``one_run`` forgets the number of runs;
    ``no_hours`` forgets the hours. Dollars with two decimals; the rates, hours and runs
    are returned too, for the prompt.

    >>> bill = sweep_bill({"where.spot_usd_per_h": 0.3, "where.on_demand_usd_per_h": 0.6,
    ...                    "where.hours_per_run": 3, "where.runs": 10})
    >>> bill["spot"], bill["on_demand"], bill["one_run"], bill["no_hours"]
    ('9.00', '18.00', '0.90', '3.00')
    >>> sweep_bill({"where.spot_usd_per_h": 0.3, "where.on_demand_usd_per_h": 0.6,
    ...             "where.hours_per_run": 10, "where.runs": 10})
    Traceback (most recent call last):
    ...
    ValueError: sweep_bill: hours_per_run and runs are both 10, so two wrong sums read alike
    """
    missing = [name for name in SWEEP_BILL_FACTS if name not in facts]
    if missing:
        raise ValueError(f"sweep_bill needs the facts {', '.join(missing)}: list them under facts")
    spot, on_demand, hours, runs = (float(facts[name]) for name in SWEEP_BILL_FACTS)
    if hours == runs:
        raise ValueError(
            f"sweep_bill: hours_per_run and runs are both {hours:g}, so two wrong sums read alike"
        )
    if spot == on_demand:
        raise ValueError(
            f"sweep_bill: spot and on-demand rates are both {spot:g} $/h, so two options read "
            "the same: use rates that differ"
        )
    return {
        "spot": f"{spot * hours * runs:,.2f}",
        "on_demand": f"{on_demand * hours * runs:,.2f}",
        "one_run": f"{spot * hours:,.2f}",
        "no_hours": f"{spot * runs:,.2f}",
        "spot_rate": f"{spot:.2f}",
        "hours": f"{hours:g}",
        "runs": f"{runs:g}",
    }


# --- memory and errors lessons (memory, budget, capacity, oom, fix-ladder, cuda-errors) ---


def figure(x: float) -> str:
    """A computed figure as a lesson prints it: whole from 100 up, else 3 significant figures.

    >>> figure(112.0), figure(12.885), figure(1.0), figure(0.125), figure(1234.5)
    ('112', '12.9', '1', '0.125', '1,234')
    """
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{x!r} is not a positive number: publish the fact as one")
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def named_figures(facts: Mapping[str, Any]) -> dict[str, str]:
    """Each fact's value as :func:`figure` prints it, under its last dotted name.

    For questions whose options are several figures the page computed (the 7B
    bills of several recipes, one card under several uses): the options are the
    page's own numbers, the question says which one is right.

    >>> named_figures({"budget.amp_7b_gb": 112.0, "budget.bf16_7b_gb": 84.0})
    {'amp_7b_gb': '112', 'bf16_7b_gb': '84'}
    >>> named_figures({"a.x": 1.0, "b.x": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: named_figures: a.x and b.x share the name 'x': give facts distinct last names
    """
    out: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name, value in facts.items():
        short = name.rsplit(".", 1)[-1]
        if short in owner:
            raise ValueError(
                f"named_figures: {owner[short]} and {name} share the name {short!r}: "
                "give facts distinct last names"
            )
        owner[short] = name
        out[short] = figure(value)
    return out


def kv_cache_sizes(facts: Mapping[str, Any]) -> dict[str, str]:
    """A GQA KV cache (GiB), and what three misreadings of the formula give instead.

    Reads ``budget.kv_gqa_gib`` (the page's cache with grouped-query attention)
    and ``budget.kv_mha_gib`` (every head keeping K and V). ``k_only`` forgets
    the factor 2 for keys and values; ``fp32`` counts 4 bytes per value instead
    of fp16's 2; ``mha`` forgets that KV heads are shared.

    >>> kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 4.0})
    {'gqa': '1', 'mha': '4', 'k_only': '0.5', 'fp32': '2'}
    >>> kv_cache_sizes({"budget.kv_gqa_gib": 1.0, "budget.kv_mha_gib": 2.0})
    Traceback (most recent call last):
    ...
    ValueError: kv_cache_sizes: the MHA cache (2) is twice the GQA one, so two options read alike
    """
    gqa, mha = float(facts["budget.kv_gqa_gib"]), float(facts["budget.kv_mha_gib"])
    if mha in (gqa, 2 * gqa):
        raise ValueError(
            f"kv_cache_sizes: the MHA cache ({mha:g}) is "
            f"{'equal to' if mha == gqa else 'twice'} the GQA one, so two options read alike"
        )
    return {
        "gqa": figure(gqa),
        "mha": figure(mha),
        "k_only": figure(gqa / 2),
        "fp32": figure(2 * gqa),
    }


def binary_size(n_bytes: float) -> str:
    """Bytes as PyTorch's OOM message prints them: GiB from 1 GiB up, else MiB, two decimals.

    >>> binary_size(10.31 * 2**30), binary_size(98.25 * 2**20)
    ('10.31 GiB', '98.25 MiB')
    """
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.2f} GiB"
    return f"{n_bytes / 2**20:.2f} MiB"


TORCH1X_FIELDS = ("requested", "total", "allocated", "free", "reserved", "reserved_unallocated")


def torch1x_cache(facts: Mapping[str, Any]) -> dict[str, str]:
    """A torch 1.x OOM message's numbers, and its cache against three misreadings.

    Reads ``oom.torch1x_<field>_bytes`` for each of ``TORCH1X_FIELDS`` (what
    ``gpulesson diagnose`` found in the page's torch 1.x example). In that wording
    "reserved" is live tensors plus the cache, so the cache is reserved minus
    allocated (``cache``, from the diagnosis). ``reserved`` reads the 1.x figure
    as torch 2.x's "reserved but unallocated"; ``free`` takes the card's free
    memory for the cache; ``added`` adds reserved and allocated.

    >>> GiB, MiB = 2**30, 2**20
    >>> v = torch1x_cache({"oom.torch1x_requested_bytes": 512 * MiB,
    ...     "oom.torch1x_total_bytes": 11.17 * GiB, "oom.torch1x_allocated_bytes": 10.31 * GiB,
    ...     "oom.torch1x_free_bytes": 98.25 * MiB, "oom.torch1x_reserved_bytes": 10.58 * GiB,
    ...     "oom.torch1x_reserved_unallocated_bytes": 0.27 * GiB})
    >>> v["cache"], v["reserved"], v["free"], v["added"]
    ('276.48 MiB', '10.58 GiB', '98.25 MiB', '20.89 GiB')
    """
    names = [f"oom.torch1x_{field}_bytes" for field in TORCH1X_FIELDS]
    missing = [name for name in names if name not in facts]
    if missing:
        raise ValueError(f"torch1x_cache needs the facts {', '.join(missing)}: list them")
    n = {field: float(facts[name]) for field, name in zip(TORCH1X_FIELDS, names, strict=True)}
    return {
        **{field: binary_size(n[field]) for field in TORCH1X_FIELDS[:5]},
        "cache": binary_size(n["reserved_unallocated"]),
        "added": binary_size(n["reserved"] + n["allocated"]),
    }


def checkpointing_savings(facts: Mapping[str, Any]) -> dict[str, str]:
    """Checkpointing's saving on the ladder's run (%), and two savings a reader expects instead.

    Reads checkpointing's own saving, ``ladder.checkpointing_saving_pct`` (the ladder
    table's row) or ``ladder.ckpt_saving_pct`` (the leftover block's; the same figure),
    ``ladder.both_saving_pct`` (checkpointing with a chunked loss), ``ladder.run_gb`` and
    ``ladder.run_persistent_gb``. ``everything`` is what checkpointing would save if
    every byte beyond the weights, gradients and optimizer state belonged to the blocks.

    >>> checkpointing_savings({"ladder.ckpt_saving_pct": 42.9, "ladder.both_saving_pct": 82.8,
    ...                        "ladder.run_gb": 21.15, "ladder.run_persistent_gb": 1.99})
    {'ckpt': '43', 'both': '83', 'everything': '91'}
    >>> checkpointing_savings({"ladder.checkpointing_saving_pct": 42.9,
    ...     "ladder.both_saving_pct": 82.8, "ladder.run_gb": 21.15,
    ...     "ladder.run_persistent_gb": 1.99})["ckpt"]
    '43'
    """
    own = facts.get("ladder.checkpointing_saving_pct", facts.get("ladder.ckpt_saving_pct"))
    if own is None:
        raise ValueError(
            "checkpointing_savings needs ladder.checkpointing_saving_pct (or "
            "ladder.ckpt_saving_pct): list it under facts"
        )
    ckpt, both = float(own), float(facts["ladder.both_saving_pct"])
    everything = 100 * (
        1 - float(facts["ladder.run_persistent_gb"]) / float(facts["ladder.run_gb"])
    )
    return {"ckpt": f"{ckpt:.0f}", "both": f"{both:.0f}", "everything": f"{everything:.0f}"}


def driver_version_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """The CUDA version in a "driver too old" message, and two ways to misread the number.

    Reads ``errors.driver_code`` (the number in the message, 1000 x major + 10 x
    minor), ``errors.driver_major`` and ``errors.driver_minor`` (what ``gpulesson
    diagnose`` read). ``release`` takes the number for the driver's own release
    (like 470.82); ``major_only`` drops the minor version.

    >>> driver_version_readings({"errors.driver_code": 11040, "errors.driver_major": 11,
    ...                          "errors.driver_minor": 4})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'code': '11040', 'version': '11.4', 'major': '11', 'minor': '4', 'release': '110.40',
     'major_only': '11.0'}
    >>> driver_version_readings({"errors.driver_code": 12000, "errors.driver_major": 12,
    ...                          "errors.driver_minor": 0})
    Traceback (most recent call last):
    ...
    ValueError: driver_version_readings: CUDA 12.0 reads like its major-only misreading
    """
    code = int(facts["errors.driver_code"])
    major, minor = int(facts["errors.driver_major"]), int(facts["errors.driver_minor"])
    if minor == 0:
        raise ValueError(
            f"driver_version_readings: CUDA {major}.0 reads like its major-only misreading"
        )
    return {
        "code": str(code),
        "version": f"{major}.{minor}",
        "major": str(major),
        "minor": str(minor),
        "release": f"{code / 100:.2f}",
        "major_only": f"{major}.0",
    }


def decode_bound_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """The decode loop's batch-1 bandwidth bound in tokens/s, and three misreadings of it.

    Reads ``decoding.bandwidth_gbs`` (the copy bandwidth, GB/s), ``decoding.weight_mb``
    (MB of fp32 weights a step reads) and ``decoding.b1_tokens_per_s`` (what batch 1
    measured). ``bound`` is bandwidth / weight bytes; ``params`` divides by parameters
    instead of bytes (4 bytes each: four times too high); ``copy`` counts each weight as
    read and written, like the copy (half); ``bits`` divides bytes per second by bits.
    ``bandwidth`` and ``weight_mb`` are the two inputs, for the prompt.

    >>> decode_bound_readings({"decoding.bandwidth_gbs": 30.0, "decoding.weight_mb": 110.0,
    ...                        "decoding.b1_tokens_per_s": 80.0})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'bound': '270', 'params': '1,100', 'copy': '140', 'bits': '34', 'measured': '80',
     'bandwidth': '30', 'weight_mb': '110'}
    """
    bandwidth = float(facts["decoding.bandwidth_gbs"]) * 1e9
    bound = bandwidth / (float(facts["decoding.weight_mb"]) * 1e6)
    return {
        "bound": about(bound),
        "params": about(bound * 4),
        "copy": about(bound / 2),
        "bits": about(bound / 8),
        "measured": about(float(facts["decoding.b1_tokens_per_s"])),
        "bandwidth": about(float(facts["decoding.bandwidth_gbs"])),
        "weight_mb": about(float(facts["decoding.weight_mb"])),
    }


def activation_ratio_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """Autocast's measured activation share, and three shares a reader expects instead.

    Reads ``mp.act_meas_ratio`` (activations saved under autocast over fp32, measured)
    and ``mp.act_est_ratio`` (the same from the budget estimate, which prices every
    activation at 2 bytes). ``half`` is "every activation became 16-bit"; ``quarter``
    confuses 16-bit with 8-bit; ``same`` is "autocast only casts the weights".
    Refuses a measurement that would read like one of those three.

    >>> activation_ratio_readings({"mp.act_meas_ratio": 0.656, "mp.act_est_ratio": 0.501})
    {'measured': '0.66', 'estimate': '0.50', 'half': '0.50', 'quarter': '0.25', 'same': '1.00'}
    >>> activation_ratio_readings({"mp.act_meas_ratio": 0.5, "mp.act_est_ratio": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: activation_ratio_readings: the measured share 0.50 reads like a distractor
    """
    measured = f"{float(facts['mp.act_meas_ratio']):.2f}"
    distractors = {"half": "0.50", "quarter": "0.25", "same": "1.00"}
    if measured in distractors.values():
        raise ValueError(
            f"activation_ratio_readings: the measured share {measured} reads like a distractor"
        )
    return {
        "measured": measured,
        "estimate": f"{float(facts['mp.act_est_ratio']):.2f}",
        **distractors,
    }


def training_hours_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """A training run's wall-clock hours, and the hours three common slips give instead.

    Reads ``compute.plan_hours`` (6ND over GPUs x dense peak x MFU, in hours) and
    ``compute.plan_mfu``. ``forward_only`` counts 2ND instead of 6ND (a third of the
    hours); ``sparse_peak`` divides by the datasheet's 2:4 sparsity figure, twice the
    dense one (half); ``full_peak`` leaves MFU out, as if the GPUs ran at their peak (MFU
    times the hours). Refuses an MFU that would make two of the four read the same.

    >>> training_hours_readings({"compute.plan_hours": 1636.0, "compute.plan_mfu": 0.4})
    {'hours': '1,600', 'forward_only': '550', 'sparse_peak': '820', 'full_peak': '650'}
    >>> training_hours_readings({"compute.plan_hours": 1636.0, "compute.plan_mfu": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: training_hours_readings: at MFU 0.5 two options read the same (820 hours)
    """
    hours, mfu = float(facts["compute.plan_hours"]), float(facts["compute.plan_mfu"])
    values = {
        "hours": about(hours),
        "forward_only": about(hours / 3),
        "sparse_peak": about(hours / 2),
        "full_peak": about(hours * mfu),
    }
    seen: dict[str, str] = {}
    for name, text in values.items():
        if text in seen.values():
            raise ValueError(
                f"training_hours_readings: at MFU {mfu:g} two options read the same ({text} hours)"
            )
        seen[name] = text
    return values


def adam_first_step(facts: Mapping[str, Any]) -> dict[str, str]:
    """What the first ``optimizer.step`` allocated (MiB), and the sizes three slips give.

    Reads ``profiling.first_optimizer_mib`` (measured: AdamW's two fp32 moments, 8 bytes a
    parameter) and ``profiling.parameters``. ``one_moment`` counts one state tensor (4 bytes
    a parameter); ``whole_bill`` counts the whole Adam training bill (16 bytes a parameter:
    weights, gradients and both moments), which the optimizer does not allocate.

    >>> adam_first_step({"profiling.first_optimizer_mib": 16.3,
    ...                  "profiling.parameters": 2137088})
    {'measured': '16', 'parameters': '2,137,088', 'one_moment': '8.2', 'whole_bill': '33'}
    """
    measured, n = float(facts["profiling.first_optimizer_mib"]), int(facts["profiling.parameters"])
    return {
        "measured": about(measured),
        "parameters": f"{n:,}",
        "one_moment": about(4 * n / 2**20),
        "whole_bill": about(16 * n / 2**20),
    }


def allreduce_time_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """An all-reduce four times the largest measured size on two ranks (ms), and three slips.

    Reads ``multigpu.gloo_largest_bus_gbs`` (bus bandwidth at the largest size, GB/s) and
    ``multigpu.gloo_largest_bytes``. With two ranks 2(N-1)/N is 1, so the ring formula gives
    4 x size / bus bandwidth (``ring``). ``factor_two`` doubles it (2(N-1)/N read as 2);
    ``eight_gpus`` uses eight GPUs' factor, 1.75; ``bits`` divides bytes by a rate in bits
    (8 times too long). Refuses readings that would make two options read the same.
    ``bus_gbs`` and ``largest_mib`` are the measured inputs, for the prompt.

    >>> allreduce_time_readings({"multigpu.gloo_largest_bus_gbs": 0.8,
    ...                          "multigpu.gloo_largest_bytes": 67108864})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'ring': '340', 'factor_two': '670', 'eight_gpus': '590', 'bits': '2,700', 'size_mib': '256',
     'bus_gbs': '0.80', 'largest_mib': '64'}
    """
    bus = float(facts["multigpu.gloo_largest_bus_gbs"]) * 1e9
    size = 4 * float(facts["multigpu.gloo_largest_bytes"])
    ms = size / bus * 1e3
    values = {
        "ring": about(ms),
        "factor_two": about(2 * ms),
        "eight_gpus": about(1.75 * ms),
        "bits": about(8 * ms),
    }
    if len(set(values.values())) != len(values):
        raise ValueError(f"allreduce_time_readings: two options read the same: {values}")
    return {
        **values,
        "size_mib": f"{size / 2**20:,.0f}",
        "bus_gbs": about(bus / 1e9),
        "largest_mib": f"{size / 4 / 2**20:,.0f}",
    }


def ring_send_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """What each GPU sends in an 8-GPU ring all-reduce (GB), and three ways to miscount it.

    Reads ``multigpu.grad_gb`` (the gradients all-reduced, GB) and ``multigpu.ring_8_gb``
    (what the page's ring block computed each GPU sends: 2(N-1)/N x the gradients).
    ``naive`` sends a copy to each of the 7 others; ``shard`` counts one eighth, sent once;
    ``whole`` sums the whole ring's traffic, 2 x the gradients x 8. The four always differ
    (1.75, 7, 1/8 and 16 times the gradients).

    >>> ring_send_readings({"multigpu.grad_gb": 28.0, "multigpu.ring_8_gb": 49.0})
    {'grad': '28', 'ring': '49', 'naive': '196', 'shard': '3.5', 'whole': '448'}
    """
    grad, ring = float(facts["multigpu.grad_gb"]), float(facts["multigpu.ring_8_gb"])
    return {
        "grad": figure(grad),
        "ring": figure(ring),
        "naive": figure(7 * grad),
        "shard": figure(grad / 8),
        "whole": figure(2 * grad * 8),
    }
