"""Mixed-precision training steps done right: torch.autocast, plus a GradScaler for fp16.

On CUDA the default is fp16 autocast with torch.amp.GradScaler; on a CPU it is bf16,
which needs no scaler (bf16 has fp32's exponent range); on Apple MPS bf16 where the
OS supports it, else fp16. Parameters, gradients and optimizer state stay fp32; only
the ops autocast lists run in 16 bits. Prints the dtype each layer produced, the loss
scale around every step, and how many steps the scaler skipped.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FEATURES, HIDDEN, CLASSES = 32, 64, 8


def pick_device() -> torch.device:
    """cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def mps_has_bf16() -> bool:
    """Whether this Mac's MPS backend can hold bf16 tensors (macOS 14 and later)."""
    try:
        torch.ones(1, device="mps", dtype=torch.bfloat16)
    except (RuntimeError, TypeError):
        return False
    return True


def default_dtype(device: torch.device) -> str:
    """fp16 on CUDA (to show the GradScaler), bf16 on CPU, bf16 or fp16 on MPS."""
    if device.type == "cuda":
        return "fp16"
    if device.type == "mps":
        return "bf16" if mps_has_bf16() else "fp16"
    return "bf16"


def dtype_problem(device: torch.device, name: str) -> str | None:
    """Why ``name`` is a poor choice on this device, or None."""
    if name == "bf16" and device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            return (
                f"this GPU (compute capability {major}.{minor}) has no bf16 tensor cores; "
                "torch.cuda.is_bf16_supported() may still say True (emulation): use --dtype fp16"
            )
    if name == "bf16" and device.type == "mps" and not mps_has_bf16():
        return "this Mac's MPS backend has no bf16 (it needs macOS 14): use --dtype fp16"
    return None


def make_data(batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable task: the class is the argmax of a fixed random projection."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, FEATURES, generator=generator)
    teacher = torch.randn(FEATURES, CLASSES, generator=generator)
    return x.to(device), (x @ teacher).argmax(dim=1).to(device)


def record_output_dtypes(model: nn.Module) -> dict[str, torch.dtype]:
    """Forward hooks that note the dtype each layer of ``model`` returns."""
    seen: dict[str, torch.dtype] = {}
    for name, layer in model.named_children():

        def hook(module: nn.Module, args: tuple, output: torch.Tensor, name: str = name) -> None:
            seen[f"{name} {type(module).__name__}"] = output.dtype

        layer.register_forward_hook(hook)
    return seen


def train_step(model, optimizer, scaler, x, y, dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
    """One step; returns the loss and whether the scaler skipped the optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype != torch.float32):
        logits = model(x)  # linear layers run in 16 bits here
        loss = F.cross_entropy(logits, y)  # autocast computes the loss in fp32
    scale = scaler.get_scale() if scaler.is_enabled() else None
    scaler.scale(loss).backward()  # backward outside autocast; scaled only for fp16
    scaler.unscale_(optimizer)  # true gradients from here on: clip them, check them
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)  # skipped if any gradient is inf or NaN
    scaler.update()  # halves the scale after a skip, doubles it after 2000 clean steps
    skipped = scale is not None and scaler.get_scale() < scale
    return loss, skipped


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (the problem and the fix) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    parser.add_argument(
        "--dtype",
        choices=("auto", *DTYPES),
        default="auto",
        help="autocast dtype: auto (fp16 on CUDA, bf16 on CPU), fp16, bf16, or fp32 (off)",
    )
    args = parser.parse_args()
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1, e.g. --steps 20 --batch 64")
    device = pick_device()
    name = default_dtype(device) if args.dtype == "auto" else args.dtype
    problem = dtype_problem(device, name)
    if problem:
        parser.error(problem)
    dtype = DTYPES[name]

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.LayerNorm(HIDDEN), nn.GELU(), nn.Linear(HIDDEN, CLASSES)
    ).to(device)
    dtypes = record_output_dtypes(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # A scaler only for fp16: its range ends at 65,504 and small gradients underflow.
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    x, y = make_data(args.batch, device)

    autocast = "off" if dtype == torch.float32 else str(dtype).removeprefix("torch.")
    why = "fp16: gradients are scaled" if scaler.is_enabled() else "not needed"
    print(f"device: {device.type}, autocast: {autocast}, GradScaler: {why}")
    first = last = None
    skipped = 0
    for step in range(1, args.steps + 1):
        scale = scaler.get_scale() if scaler.is_enabled() else None
        loss, was_skipped = train_step(model, optimizer, scaler, x, y, dtype)
        if not torch.isfinite(loss):
            print(f"step {step}: loss is {loss.item()}: stop and find the NaN/inf")
        skipped += was_skipped
        if step == 1:
            print("output dtype of each layer:")
            for layer, layer_dtype in dtypes.items():
                print(f"  {layer}: {str(layer_dtype).removeprefix('torch.')}")
            param = next(model.parameters())
            print(
                f"  loss: {str(loss.dtype).removeprefix('torch.')}; parameters: "
                f"{str(param.dtype).removeprefix('torch.')}; gradients: "
                f"{str(param.grad.dtype).removeprefix('torch.')}"
            )
        value = loss.item()
        first = value if first is None else first
        last = value
        scale_text = f", scale {scale:,.0f}" if scale is not None else ""
        print(f"step {step}: loss {value:.4f}{scale_text}{', SKIPPED' if was_skipped else ''}")
    print(f"skipped {skipped} of {args.steps} steps")
    print("(with fp16 an occasional skip is normal; every step skipped means a NaN/inf bug)")
    print(f"loss: {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
