"""``gpulesson budget``: a step's memory ledger, and whether it fits your cards."""

from __future__ import annotations

import argparse
import json
import math
import re

from gpulesson.memory import budget
from gpulesson.memory import render as budget_render
from gpulesson.units import parse_size

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_COUNT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBtT]?)\s*$")


def parse_count(text: str, name: str = "--params") -> float:
    """Read a parameter count like ``7e9``, ``7B`` or ``1.3b``.

    >>> parse_count("7B")
    7000000000.0
    >>> parse_count("nan")
    Traceback (most recent call last):
    ...
    ValueError: --params 'nan' is not a positive count: write e.g. 7e9 or 7B
    """
    match = _COUNT_RE.match(text)
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} {text!r} is not a positive count: write e.g. 7e9 or 7B")
    return value


def _positive_int(name: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--{name} {text!r} is not a whole number") from None
    if value <= 0:
        raise ValueError(f"--{name} {text!r} must be a positive whole number")
    return value


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``budget`` subcommand."""
    parser = commands.add_parser(
        "budget",
        help="estimate a training or inference step's memory, term by term",
        description="Estimate the memory of one step: weights, gradients, optimizer state, "
        "master weights, activations, temporaries, KV cache; the peak phase; and whether it "
        "fits your cards with headroom. With only --params and --preset the total is the "
        "sources' per-parameter arithmetic.",
    )
    parser.add_argument("--params", help="parameter count, e.g. 7e9 or 7B")
    parser.add_argument("--preset", default="bf16", help=f"recipe: {', '.join(budget.PRESETS)}")
    parser.add_argument(
        "--optimizer",
        choices=tuple(budget.OPTIMIZER_STATES),
        help="override the preset's optimizer",
    )
    parser.add_argument(
        "--state-dtype",
        choices=tuple(budget.DTYPE_BYTES),
        help="override the optimizer state's dtype",
    )
    for name in ("vocab", "seq", "hidden", "heads", "layers", "batch"):
        parser.add_argument(f"--{name}", metavar="N", help=f"transformer config: {name}")
    parser.add_argument("--attention", choices=("eager", "sdpa"), default="sdpa")
    parser.add_argument("--checkpointing", choices=("none", "full"), default="none")
    parser.add_argument(
        "--gpus", default="1", metavar="N", help="GPUs for data parallel / sharding"
    )
    parser.add_argument(
        "--zero",
        choices=("0", "1", "2", "3"),
        default="0",
        help="ZeRO stage (3 is FSDP full sharding)",
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
        "--lora-rank", metavar="R", help="LoRA/QLoRA: adapter rank (needs a config)"
    )
    parser.add_argument("--lora-targets", choices=budget.LORA_TARGETS, default="attn")
    parser.add_argument(
        "--foreach", action="store_true", help="price the multi-tensor optimizer (CUDA's default)"
    )
    parser.add_argument(
        "--card", nargs="+", metavar="SIZE", help="card sizes for a fits verdict, e.g. 24GiB 80GB"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def build_budget(args: argparse.Namespace) -> budget.Budget:
    """The budget the arguments ask for; ValueError names a bad one."""
    dims = {
        n: _positive_int(n, getattr(args, n)) for n in ("vocab", "seq", "hidden", "heads", "layers")
    }
    batch = _positive_int("batch", args.batch)
    shape = None
    if any(v is not None for v in dims.values()):
        missing = [f"--{n}" for n, v in dims.items() if v is None]
        if missing:
            raise ValueError(f"a transformer config also needs {' '.join(missing)}")
        shape = budget.TransformerShape(batch=batch or 1, **dims)  # type: ignore[arg-type]
    params = parse_count(args.params) if args.params is not None else None
    if params is None and shape is None:
        raise ValueError(
            "give --params (e.g. 7e9) or a config (--vocab --seq --hidden --heads --layers)"
        )
    fraction = None
    if args.trainable_fraction is not None:
        try:
            fraction = float(args.trainable_fraction)
        except ValueError:
            raise ValueError(
                f"--trainable-fraction {args.trainable_fraction!r} is not a number"
            ) from None
    return budget.estimate(
        params,
        preset=args.preset,
        shape=shape,
        optimizer=args.optimizer,
        state_dtype=args.state_dtype,
        attention=args.attention,
        checkpointing=args.checkpointing,
        gpus=_positive_int("gpus", args.gpus) or 1,
        zero=int(args.zero),
        accumulation_steps=_positive_int("accumulation", args.accumulation) or 1,
        trainable_fraction=fraction,
        lora_rank=_positive_int("lora-rank", args.lora_rank),
        lora_targets=args.lora_targets,
        foreach=args.foreach,
    )


def run(args: argparse.Namespace) -> int:
    """Estimate the budget and print it, with a verdict per card."""
    result = build_budget(args)
    cards = [parse_size(c) for c in args.card or []]
    verdicts = [budget.fits(result, card) for card in cards]
    if args.json:
        data = budget_render.to_dict(result)
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
    return 0
