"""What every benchmark shares to run unchanged on the CPU or a GPU: the --device, --dtype and --compile flags, and
waiting for the device before reading a clock."""

import argparse

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")


def add_device_arguments(parser: argparse.ArgumentParser, dtype_help: str) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="float32", help=dtype_help)
    parser.add_argument("--compile", action="store_true", help="torch.compile the models before the warm-up")
    parser.add_argument("--compile-backend", choices=COMPILE_BACKENDS, default="inductor",
                        help="torch.compile's backend: inductor generates kernels; eager and aot_eager only trace the "
                             "graphs (forward; forward and backward), a quick check that the compiled path runs")


def device_from(name: str) -> torch.device:
    """``cpu`` or ``cuda``, refusing ``cuda`` where no GPU is visible."""
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible (torch.cuda.is_available() is False); use --device cpu")
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work before a clock is read (CUDA runs asynchronously; the CPU needs no wait)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device, threads: int) -> str:
    """The device a table was measured on, for its header."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {threads} threads"
