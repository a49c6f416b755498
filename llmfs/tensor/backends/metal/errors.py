"""Errors of the Metal backend and its CPU emulator, all :class:`~llmfs.tensor.errors.TensorError`.

``KernelCompileError`` carries the compiler's own text (Metal's or the C++ compiler's);
``KernelLintError`` lists the MSL rules a source breaks that C++ would have let through;
``KernelLaunchError`` reports a failed dispatch (Metal's command-buffer error text, or the
emulator's); ``KernelMemoryError`` is an out-of-bounds access caught by AddressSanitizer;
``MetalDTypeError`` refuses a dtype a kernel does not take (float64 above all, which Metal does
not have, and int64), by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmfs.tensor.errors import DTypeError, TensorError


class MetalError(TensorError):
    """Root of the errors raised by :mod:`llmfs.tensor.backends.metal`."""

    condition = "Metal kernel rule"


class KernelCompileError(MetalError):
    """A kernel source did not compile; ``log`` holds the compiler's diagnostics verbatim."""

    condition = "kernel compiles"

    def __init__(self, what: str, log: str) -> None:
        self.log = log
        super().__init__(f"{what} failed to compile:\n{log.strip()}")


class KernelLintError(KernelCompileError):
    """The source uses something Metal rejects although C++ would accept it.

    ``problems`` is a list of ``(line, message)`` pairs, 1-based lines of the kernel source.
    """

    condition = "source stays inside Metal Shading Language"

    def __init__(self, problems: Sequence[tuple[int, str]]) -> None:
        self.problems = list(problems)
        text = "\n".join(f"line {line}: {message}" for line, message in self.problems)
        MetalError.__init__(
            self, f"the kernel source breaks {len(self.problems)} Metal rule(s):\n{text}"
        )
        self.log = text


class KernelNotFoundError(MetalError):
    """``run_kernel`` named a kernel function the source does not define."""

    condition = "kernel exists"

    def __init__(self, name: str, available: Sequence[str]) -> None:
        self.name = name
        self.available = tuple(available)
        listed = ", ".join(self.available) or "none"
        super().__init__(f"no kernel named {name!r} in the source (kernels defined: {listed})")


class KernelArgumentError(MetalError):
    """The buffers or grid given to a kernel do not match what it declares or what Metal allows."""

    condition = "kernel arguments match"


class KernelLaunchError(MetalError):
    """A dispatch failed; the message carries Metal's (or the emulator's) error text."""

    condition = "kernel runs"


class KernelMemoryError(KernelLaunchError):
    """An isolated emulator launch caught a kernel reading or writing outside a buffer.

    ``kernel`` names the kernel; ``report`` is AddressSanitizer's report (or the guarded
    harness's, naming the buffer and byte offset); ``summary`` its one-line ``SUMMARY`` (or first
    line).
    """

    condition = "kernel stays inside its buffers"

    def __init__(self, kernel: str, report: str) -> None:
        self.kernel = kernel
        self.report = report
        summary = next(
            (line.strip() for line in report.splitlines() if line.startswith("SUMMARY:")),
            report.strip().splitlines()[0] if report.strip() else "no report",
        )
        self.summary = summary
        super().__init__(
            f"kernel {kernel!r} accessed memory outside its buffers (a missing bounds guard?): "
            f"{summary}"
        )


class MetalUnavailableError(MetalError):
    """The requested executor cannot run here (no Mac/Metal device, or no C++ compiler)."""

    condition = "Metal executor available"


class MetalDTypeError(DTypeError):
    """A dtype the Metal kernels do not take was sent to them: float64 (Metal has no 64-bit
    float), int64 (the kernels take 32-bit integers), or a dtype an op has no kernel for (for
    example ``exp`` of int32, which NumPy computes in float64). ``allowed`` lists what the op
    takes."""

    def __init__(
        self,
        dtype: object,
        *,
        where: str,
        supported: Sequence[str] = ("float32", "float16"),
    ) -> None:
        super().__init__(dtype, supported, where=where)
        name = str(dtype)
        if name == "float64":
            reason = (
                "Metal has no 64-bit floating point type, and llmfs never downcasts silently. "
                "Convert first (for example Tensor.from_numpy(t.to_numpy(), dtype='float32')), "
                "or use the numpy backend for float64"
            )
        elif name == "int64":
            reason = (
                "the Metal kernels take 32-bit integers, and llmfs never narrows silently. "
                "Convert to int32 first, or use the numpy backend for int64"
            )
        else:
            reason = f"it takes {', '.join(supported)}. Convert first, or use the numpy backend"
        self.args = (f"{where} does not take {name}: {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


__all__ = [
    "KernelArgumentError",
    "KernelCompileError",
    "KernelLaunchError",
    "KernelLintError",
    "KernelMemoryError",
    "KernelNotFoundError",
    "MetalDTypeError",
    "MetalError",
    "MetalUnavailableError",
]
