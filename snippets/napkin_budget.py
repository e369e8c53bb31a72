"""Napkin memory budget: the four-ledger bill of training (or serving) a model.

Bytes per parameter for weights, gradients, optimizer state and fp32 master
weights, times the parameter count. Activations are left out: they depend on
batch, sequence and model shape, so measure them (torch.cuda.max_memory_allocated).

    python napkin_budget.py --params 7e9 --recipe amp
    python napkin_budget.py --params 7e9 --recipe qlora --trainable 0.001
"""

from __future__ import annotations

import argparse

GB = 10**9  # decimal gigabytes, as card vendors and the sources write them
GIB = 2**30

# recipe: (weights, gradients, optimizer state, master) in bytes per parameter
RECIPES = {
    "amp": (4, 4, 8, 0),  # PyTorch AMP: fp32 weights, grads and Adam moments (the norm)
    "fp16-fp32-grads": (2, 4, 8, 0),  # fp16 weights, fp32 grads, fp32 Adam moments
    "bf16": (2, 2, 8, 0),  # bf16 weights and grads, fp32 Adam moments
    "mixed-fp32-master": (2, 2, 8, 4),  # 16-bit weights plus an fp32 master copy
    "fp32": (4, 4, 8, 0),
    "sgd": (2, 4, 0, 0),  # fp16 weights, fp32 grads, no optimizer state
    "infer-fp16": (2, 0, 0, 0),
    "infer-int8": (1, 0, 0, 0),
    "infer-4bit": (0.5, 0, 0, 0),
    "lora": (2, 2, 8, 0),  # frozen bf16 base; grads and state for adapters only
    "qlora": (0.5, 2, 8, 0),  # frozen 4-bit base; adapters as in lora
}


def bill(params: float, recipe: str, trainable: float) -> dict[str, float]:
    """Bytes per ledger for ``params`` parameters, of which a share ``trainable`` trains."""
    weights, grads, state, master = RECIPES[recipe]
    adapters = recipe in ("lora", "qlora")
    n_train = params * trainable if adapters else params
    return {
        "weights": params * weights + (n_train * 2 if adapters else 0),  # bf16 adapters
        "gradients": n_train * grads,
        "optimizer state": n_train * state,
        "fp32 master weights": n_train * master,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the four-ledger memory bill of a model.")
    parser.add_argument("--params", type=float, required=True, help="parameter count, e.g. 7e9")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="amp")
    parser.add_argument(
        "--trainable",
        type=float,
        default=0.001,
        help="lora/qlora: share of parameters trained (default 0.001)",
    )
    args = parser.parse_args()
    if not args.params > 0 or args.params == float("inf"):
        parser.error(f"--params {args.params} must be a positive number, e.g. 7e9")
    if not 0 < args.trainable <= 1:
        parser.error(f"--trainable {args.trainable} must be in (0, 1]")
    ledgers = bill(args.params, args.recipe, args.trainable)
    total = sum(ledgers.values())
    print(f"{args.params:.3g} parameters, recipe {args.recipe}")
    for name, value in ledgers.items():
        print(f"  {name:<20} {value / GB:10.2f} GB")
    print(f"  {'total':<20} {total / GB:10.2f} GB = {total / GIB:.2f} GiB, before activations")


if __name__ == "__main__":
    main()
