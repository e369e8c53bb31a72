"""``gpulesson budget``: a step's memory ledger, and whether it fits your cards.

Torch-free: this module imports only ``gpulesson.memory``'s arithmetic
(``recipes``, ``budget``, ``render``) and ``gpulesson.units``, none of which
imports torch, so a bad argument is refused before anything heavy loads. Every
bad argument is a ``ValueError`` naming the option and the fix, which the CLI
prints as one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import re

from gpulesson.memory import budget, comm, compute, recipes
from gpulesson.memory import compute_render as compute_render
from gpulesson.memory import render as budget_render
from gpulesson.memory.shape import MAX_COUNT, count_limit, short_number, too_large
from gpulesson.results import datasheets
from gpulesson.units import parse_size

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBtT]?)\s*$")
_SHAPE_OPTIONS = ("vocab", "seq", "hidden", "heads", "layers")


def parse_count(text: str, name: str = "--params") -> float:
    """Read a parameter count like ``7e9``, ``7B`` or ``1.3b``: at least 1, at most 2^53.

    >>> parse_count("7B")
    7000000000.0
    >>> parse_count("nan")
    Traceback (most recent call last):
    ...
    ValueError: --params 'nan' is not a positive count: write e.g. 7e9 or 7B
    >>> parse_count("1e-300")
    Traceback (most recent call last):
    ...
    ValueError: --params '1e-300' is less than one parameter: write e.g. 7e9 or 7B
    """
    match = _COUNT_RE.match(text)
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} {text!r} is not a positive count: write e.g. 7e9 or 7B")
    if value < 0.5:
        raise ValueError(f"{name} {text!r} is less than one parameter: write e.g. 7e9 or 7B")
    if value > MAX_COUNT:
        raise ValueError(
            f"{name} {short_number(text)!r} is too large: at most 2^53 ({MAX_COUNT:.1e}), "
            "e.g. 7e9 or 7B"
        )
    return value


def positive_int(option: str, text: str | None) -> int | None:
    """Read a whole-number option (``None`` stays ``None``), up to its maximum.

    The maxima are :data:`gpulesson.memory.shape.COUNT_LIMITS` (2^53, and 10,000 layers),
    checked here before any arithmetic, so a huge count is refused at once.

    >>> positive_int("batch", "8")
    8
    >>> positive_int("gpus", "1" + "0" * 400)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --gpus 100000000000...(401 digits) is too large: at most 2^53 (9.0e+15), because ...
    >>> positive_int("layers", "3000000")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --layers 3000000 is too large: at most 10,000, because the estimate walks ...
    """
    if text is None:
        return None
    name = option.replace("-", "_")
    try:
        value = int(text)
    except ValueError:
        if text.strip().lstrip("+").isdigit():  # past int()'s 4,300 digits
            raise ValueError(too_large(f"--{option} ", short_number(text), name)) from None
        raise ValueError(f"--{option} {short_number(text)!r} is not a whole number") from None
    if value <= 0:
        raise ValueError(f"--{option} {short_number(text)!r} must be a positive whole number")
    if value > count_limit(name).maximum:
        raise ValueError(too_large(f"--{option} ", short_number(text), name))
    return value


def parse_fraction(text: str | None) -> float | None:
    """Read ``--trainable-fraction``: a share above 0 and at most 1.

    >>> parse_fraction("0.01")
    0.01
    >>> parse_fraction("nan")
    Traceback (most recent call last):
    ...
    ValueError: --trainable-fraction 'nan' must be a share above 0 and at most 1, e.g. 0.001
    """
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= 1:
        raise ValueError(
            f"--trainable-fraction {short_number(text)!r} must be a share above 0 and at most 1, "
            "e.g. 0.001"
        )
    return value


def parse_card(text: str) -> int:
    """Read one ``--card`` size such as ``24GiB`` or ``80GB`` into bytes.

    >>> parse_card("24GiB")
    25769803776
    >>> parse_card("1e-30GiB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --card '1e-30GiB': size '1e-30GiB' is less than one byte: ...
    """
    try:
        return parse_size(text)
    except ValueError as exc:
        raise ValueError(f"--card {short_number(text)!r}: {exc}") from None


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``budget`` subcommand."""
    parser = commands.add_parser(
        "budget",
        help="estimate a training or inference step's memory, term by term",
        description="Estimate the memory of one step: weights, gradients, optimizer state, "
        "master weights, activations, temporaries, KV cache; the peak phase; and whether it "
        "fits your cards with headroom. With only --params and --preset the total is the "
        "per-parameter arithmetic. With both --params and a config, --params prices the "
        "weights, gradients and optimizer state and the config prices activations and the "
        "KV cache.",
    )
    parser.add_argument("--params", help="parameter count, e.g. 7e9 or 7B")
    parser.add_argument(
        "--preset",
        default=recipes.DEFAULT_TRAINING_PRESET,
        help=f"recipe (default {recipes.DEFAULT_TRAINING_PRESET}: fp32 weights, gradients and "
        f"AdamW moments, 16-bit activations): {', '.join(recipes.PRESETS)}",
    )
    parser.add_argument(
        "--optimizer",
        choices=tuple(recipes.OPTIMIZER_STATES),
        help="override the preset's optimizer",
    )
    parser.add_argument(
        "--state-dtype",
        choices=tuple(recipes.DTYPE_BYTES),
        help="override the optimizer state's dtype",
    )
    for name in (*_SHAPE_OPTIONS, "batch"):
        parser.add_argument(
            f"--{name}",
            metavar="N",
            help=f"transformer config: {name} (at most {count_limit(name).stated})",
        )
    parser.add_argument(
        "--kv-heads",
        metavar="N",
        help="key/value heads for grouped-query attention (default: --heads, one per head)",
    )
    parser.add_argument(
        "--ffn",
        metavar="N",
        help="the MLP's inner width (intermediate_size; default 4 x --hidden, GPT-2's)",
    )
    parser.add_argument(
        "--gated",
        action="store_true",
        help="a gated MLP (SwiGLU, as Llama and Mistral: three matrices, no biases)",
    )
    parser.add_argument(
        "--untied-head",
        action="store_true",
        help="an output head of its own (tie_word_embeddings false): vocab x hidden more",
    )
    parser.add_argument(
        "--no-position-table",
        action="store_true",
        help="no learned position table (rotary positions, as Llama and Mistral)",
    )
    parser.add_argument("--attention", choices=budget.ATTENTIONS, default="sdpa")
    parser.add_argument(
        "--impl",
        choices=budget.IMPLS,
        default="gpulesson",
        help="whose GPT-2 the activation and temporary terms follow: gpulesson (the course's "
        "own, the default) or transformers (Hugging Face's GPT2LMHeadModel: its tanh GELU "
        "keeps more tensors, its loss upcasts 16-bit logits; training, standard loss, no "
        "checkpointing)",
    )
    parser.add_argument("--checkpointing", choices=budget.CHECKPOINTING, default="none")
    parser.add_argument(
        "--loss",
        choices=budget.LOSSES,
        default="standard",
        help="cross-entropy: standard (full logits) or chunked (a slice of tokens at a time)",
    )
    parser.add_argument(
        "--loss-chunks",
        metavar="N",
        help=f"slices of a chunked loss (default {budget.DEFAULT_LOSS_CHUNKS})",
    )
    parser.add_argument(
        "--gpus",
        default="1",
        metavar="N",
        help="GPUs for data parallel / sharding (a training budget then also reports the bytes "
        "each GPU sends per optimizer step); with --gpu also the GPU count for training time",
    )
    parser.add_argument(
        "--zero",
        choices=("0", "1", "2", "3"),
        default="0",
        help="ZeRO stage (3 is FSDP full sharding)",
    )
    parser.add_argument(
        "--tensor-parallel",
        default="1",
        metavar="T",
        help="tensor-parallel degree: the parameter-sized terms spread over T x P GPUs of a "
        "replica (a model; must divide --heads)",
    )
    parser.add_argument(
        "--pipeline-parallel",
        default="1",
        metavar="P",
        help="pipeline-parallel degree (must divide --layers); --gpus stays the data-parallel "
        "count, so the run uses gpus x T x P",
    )
    parser.add_argument(
        "--accumulation",
        default="1",
        metavar="N",
        help="gradient accumulation steps (memory is one micro-batch's)",
    )
    parser.add_argument(
        "--trainable-fraction",
        metavar="F",
        help="LoRA/QLoRA: share of parameters trained (default 0.001)",
    )
    parser.add_argument(
        "--lora-rank",
        metavar="R",
        help="LoRA/QLoRA: adapter rank (needs a config; at most --hidden, the smallest "
        "dimension of the adapted matrices)",
    )
    parser.add_argument("--lora-targets", choices=budget.LORA_TARGETS, default="attn")
    parser.add_argument(
        "--foreach", action="store_true", help="price the multi-tensor optimizer (CUDA's default)"
    )
    parser.add_argument(
        "--card", nargs="+", metavar="SIZE", help="card sizes for a fits verdict, e.g. 24GiB 80GB"
    )
    parser.add_argument(
        "--tokens",
        metavar="D",
        help="training tokens, e.g. 1.4e11 or 140B: adds the training FLOPs (6 x parameters x "
        "tokens, plus attention with a config)",
    )
    parser.add_argument(
        "--gpu",
        metavar="ID",
        help="with --tokens and --mfu: the GPU (a datasheet id) whose dense peak prices the "
        f"hours: {', '.join(datasheets.ids())}",
    )
    parser.add_argument(
        "--mfu",
        metavar="F",
        help=f"model FLOPs utilization the run reaches, e.g. 0.4 (with --gpu): from "
        f"{compute.MIN_MFU:g} to 1",
    )
    parser.add_argument(
        "--price-per-gpu-hour",
        metavar="USD",
        help="with --gpu: US dollars per GPU-hour, from 0 to "
        f"{compute.MAX_PRICE_USD_PER_GPU_HOUR:,.0f} (default: the where-to-run lesson's example "
        "rate for that GPU, an example and not a quote)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def build_shape(args: argparse.Namespace) -> budget.TransformerShape | None:
    """The transformer config the arguments give, or ``None`` without one."""
    dims = {n: positive_int(n, getattr(args, n)) for n in _SHAPE_OPTIONS}
    batch = positive_int("batch", args.batch)
    kv_heads = positive_int("kv-heads", args.kv_heads)
    ffn = positive_int("ffn", getattr(args, "ffn", None))
    forms = {
        "--ffn": ffn is not None,
        "--gated": getattr(args, "gated", False),
        "--untied-head": getattr(args, "untied_head", False),
        "--no-position-table": getattr(args, "no_position_table", False),
    }
    if all(v is None for v in dims.values()):
        given = [name for name, on in forms.items() if on]
        if batch is not None or kv_heads is not None or given:
            option = "--batch" if batch is not None else "--kv-heads" if kv_heads else given[0]
            raise ValueError(
                f"{option} needs a transformer config: give --vocab --seq --hidden --heads "
                "--layers too"
            )
        return None
    missing = [f"--{n}" for n, v in dims.items() if v is None]
    if missing:
        raise ValueError(f"a transformer config also needs {' '.join(missing)}")
    return budget.TransformerShape(
        batch=batch or 1,
        kv_heads=kv_heads,
        ffn=ffn,
        gated=forms["--gated"],
        tied_head=not forms["--untied-head"],
        learned_positions=not forms["--no-position-table"],
        **dims,  # type: ignore[arg-type]
    )


def build_budget(args: argparse.Namespace) -> budget.Budget:
    """The budget the arguments ask for; ValueError names a bad one."""
    shape = build_shape(args)
    params = parse_count(args.params) if args.params is not None else None
    if params is None and shape is None:
        raise ValueError(
            "give --params (e.g. 7e9) or a config (--vocab --seq --hidden --heads --layers)"
        )
    chunks = positive_int("loss-chunks", args.loss_chunks)
    if chunks is not None and args.loss != "chunked":
        raise ValueError("--loss-chunks needs --loss chunked")
    rank = positive_int("lora-rank", args.lora_rank)
    if rank is not None and shape is not None and rank > shape.hidden:
        raise ValueError(
            f"--lora-rank {rank} is larger than --hidden {shape.hidden}, the smallest dimension "
            f"of the adapted matrices ({shape.hidden} x {shape.hidden} attention projections, "
            f"{shape.hidden} x {4 * shape.hidden} MLP): give at most {shape.hidden}, e.g. 8 or 16"
        )
    return budget.estimate(
        params,
        preset=args.preset,
        shape=shape,
        optimizer=args.optimizer,
        state_dtype=args.state_dtype,
        attention=args.attention,
        checkpointing=args.checkpointing,
        gpus=positive_int("gpus", args.gpus) or 1,
        zero=int(args.zero),
        accumulation_steps=positive_int("accumulation", args.accumulation) or 1,
        trainable_fraction=parse_fraction(args.trainable_fraction),
        lora_rank=rank,
        lora_targets=args.lora_targets,
        foreach=args.foreach,
        loss=args.loss,
        loss_chunks=chunks,
        impl=args.impl,
        tensor_parallel=positive_int("tensor-parallel", getattr(args, "tensor_parallel", "1")) or 1,
        pipeline_parallel=positive_int("pipeline-parallel", getattr(args, "pipeline_parallel", "1"))
        or 1,
    )


def parse_tokens(text: str | None) -> float | None:
    """Read ``--tokens`` like ``1.4e11`` or ``140B``: at least one token, at most 2^53.

    >>> parse_tokens("140B")
    140000000000.0
    >>> parse_tokens("1e400")
    Traceback (most recent call last):
    ...
    ValueError: --tokens '1e400' is not a positive count of tokens: write e.g. 1.4e11 or 140B
    """
    if text is None:
        return None
    match = _COUNT_RE.match(text)
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"--tokens {short_number(text)!r} is not a positive count of tokens: "
            "write e.g. 1.4e11 or 140B"
        )
    if value < 0.5:
        raise ValueError(f"--tokens {text!r} is less than one token: write e.g. 1.4e11 or 140B")
    if value > MAX_COUNT:
        raise ValueError(
            f"--tokens {short_number(text)!r} is too large: at most 2^53 ({MAX_COUNT:.1e})"
        )
    return value


def parse_mfu(text: str | None) -> float | None:
    """Read ``--mfu``: a share from ``compute.MIN_MFU`` to 1.

    >>> parse_mfu("0.4")
    0.4
    >>> parse_mfu("40")
    Traceback (most recent call last):
    ...
    ValueError: --mfu 40 must be a share above 0 and at most 1: no run beats its peak; \
for 40% write 0.4
    """
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    return compute.check_mfu(value, label=f"--mfu {short_number(text)}")


def parse_price(text: str | None) -> float | None:
    """Read ``--price-per-gpu-hour``: US dollars, from 0 to ``compute.MAX_PRICE_USD_PER_GPU_HOUR``.

    >>> parse_price("2.5")
    2.5
    >>> parse_price("-1")
    Traceback (most recent call last):
    ...
    ValueError: --price-per-gpu-hour '-1' must be a price of at least 0 US dollars, e.g. 2.5
    >>> parse_price("1e308")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --price-per-gpu-hour 1e308 is more than 1,000 US dollars per GPU-hour, ...
    """
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"--price-per-gpu-hour {short_number(text)!r} must be a price of at least 0 US "
            "dollars, e.g. 2.5"
        )
    return compute.check_price(value, label=f"--price-per-gpu-hour {short_number(text)}")


def build_compute(
    args: argparse.Namespace, result: budget.Budget
) -> tuple[compute.TrainingFlops, compute.TrainingPlan | None] | None:
    """The training FLOPs (with ``--tokens``) and, with ``--gpu``, hours and cost; else None."""
    tokens = parse_tokens(args.tokens)
    mfu = parse_mfu(args.mfu)
    price = parse_price(args.price_per_gpu_hour)
    given = [f"--{o}" for o, v in (("mfu", mfu), ("price-per-gpu-hour", price)) if v is not None]
    if args.gpu is not None:
        given.insert(0, "--gpu")
    if tokens is None:
        if given:
            raise ValueError(f"{given[0]} prices training time: give --tokens too, e.g. 1.4e11")
        return None
    if result.recipe.inference:
        raise ValueError(
            f"--tokens prices training, and preset {result.preset} does not train: "
            "drop --tokens or pick a training preset such as amp"
        )
    shape = result.shape
    flops = compute.training_flops(
        result.parameters,
        tokens,
        trainable_params=result.trainable_parameters,
        checkpointing=result.checkpointing == "full",
        attention=None
        if shape is None
        else compute.AttentionShape(layers=shape.layers, seq=shape.seq, hidden=shape.hidden),
    )
    if args.gpu is None:
        if given:
            raise ValueError(
                f"{given[0]} needs --gpu (the GPU whose peak it prices), e.g. a100-80gb"
            )
        return flops, None
    try:
        compute.peak_for(datasheets.get(args.gpu), result.recipe.compute_dtype)
    except ValueError as exc:
        raise ValueError(f"--gpu: {exc}") from None
    if mfu is None:
        raise ValueError(
            "--gpu needs --mfu: the share of the peak the run reaches, e.g. 0.4 "
            "(large runs report 0.38 to 0.46)"
        )
    plan = compute.plan_training(
        flops,
        gpu=args.gpu,
        gpus=positive_int("gpus", args.gpus) or 1,
        mfu=mfu,
        compute_dtype=result.recipe.compute_dtype,
        price_usd_per_gpu_hour=price,
    )
    return flops, plan


def run(args: argparse.Namespace) -> int:
    """Estimate the budget and print it, with a verdict per card (and the compute side)."""
    cards = [parse_card(c) for c in args.card or []]
    result = build_budget(args)
    training = build_compute(args, result)
    verdicts = [budget.fits(result, card) for card in cards]
    step_comm = comm.budget_comm(result)  # None for inference: no optimizer step
    if args.json:
        data = budget_render.to_dict(result)
        if step_comm is not None:
            data.update(budget_render.comm_to_dict(step_comm))
        if training is not None:
            data.update(compute_render.to_dict(*training))
        data["cards"] = [
            {
                "card_bytes": v.card_bytes,
                "needed_bytes": v.needed_bytes,
                "fits": v.fits,
                "spare_bytes": v.spare_bytes,
            }
            for v in verdicts
        ]
        print(json.dumps(data, indent=2))
        return 0
    print(budget_render.to_text(result))
    for text, v in zip(args.card or [], verdicts, strict=True):
        verdict = "fits" if v.fits else "does not fit"
        print(
            f"  card {text}: {verdict} (needs {v.needed_bytes / 1e9:.2f} GB of "
            f"{v.card_bytes / 1e9:.2f} GB; spare {v.spare_bytes / 1e9:+.2f} GB)"
        )
    if cards:
        print(f"  headroom rule: {budget.HEADROOM}")
    if step_comm is not None and step_comm.gpus > 1:
        print(budget_render.comm_to_text(step_comm))
    if training is not None:
        print(compute_render.to_text(*training))
    return 0
