"""Errors of the Metal backend and its CPU emulator, declared as every error of the library is
(:mod:`llmfs.tensor.errors`: a condition, fields, a message) and re-exported by
:mod:`llmfs.tensor`.

``KernelCompileError`` carries the compiler's own text (Metal's or the C++ compiler's);
``KernelLintError`` lists the named rules a source breaks (found by the lint, or read from the
emulator's compiler errors, whose own text it keeps);
``KernelLaunchError`` reports a failed dispatch (Metal's command-buffer error text, or the
emulator's); ``KernelMemoryError`` is an out-of-bounds access caught by AddressSanitizer;
``MetalDTypeError`` refuses a dtype a kernel does not take (float64 above all, which Metal does
not have, and int64), by name.
"""

from __future__ import annotations

from llmfs.tensor.errors import DTypeError, TensorError, shown


class MetalError(TensorError):
    """Root of the errors raised by :mod:`llmfs.tensor.backends.metal` (free text as a class)."""

    condition = "Metal kernel rule"


class KernelCompileError(MetalError):
    """A kernel source did not compile; ``log`` holds the compiler's diagnostics verbatim."""

    condition = "kernel compiles"
    what: str
    log: str

    def explain(self) -> str:
        return f"{self.what} failed to compile:\n{self.log.strip()}"


class KernelLintError(KernelCompileError):
    """The source breaks a named rule: one Metal itself enforces, or one the emulator needs to
    compute what Metal computes (see :mod:`~llmfs.tensor.backends.metal.lint`).

    ``problems`` holds :class:`~llmfs.tensor.backends.metal.lint.Problem` triples ``(line,
    rule, message)``, 1-based lines of the kernel source; ``log`` is them one per line;
    ``compiler_log`` is the C++ compiler's own text when the problems were read from it (the
    emulator compiles the source and maps each error to the rule it breaks), else empty.
    """

    condition = "source stays inside Metal Shading Language"
    problems: list[tuple[int, str, str]]
    compiler_log: str = ""

    def __post_init__(self) -> None:
        self.what = "the kernel source"
        self.log = "\n".join(
            f"line {line} [{rule}]: {message}" for line, rule, message in self.problems
        )

    @property
    def rules(self) -> list[str]:
        """The names of the rules broken, in the order of :attr:`problems`."""
        return [rule for _, rule, _ in self.problems]

    def explain(self) -> str:
        tail = " (the compiler's own text is in .compiler_log)" if self.compiler_log else ""
        return f"the kernel source breaks {len(self.problems)} rule(s){tail}:\n{self.log}"


class KernelNotFoundError(MetalError):
    """``run_kernel`` named a kernel function the source does not define."""

    condition = "kernel exists"
    name: str
    available: tuple[str, ...]

    def explain(self) -> str:
        listing = ", ".join(self.available) or "none"
        return f"no kernel named {self.name!r} in the source (kernels defined: {listing})"


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
    line); ``thread`` the ``thread_position_in_grid`` ``(x, y, z)`` of the first thread that
    stepped outside (the launch stops there), or ``None`` when the harness could not tell.
    """

    condition = "kernel stays inside its buffers"
    kernel: str
    report: str

    def __post_init__(self) -> None:
        lines = self.report.strip().splitlines()
        self.summary = next(
            (line.strip() for line in lines if line.startswith("SUMMARY:")),
            lines[0] if lines else "no report",
        )
        self.thread: tuple[int, int, int] | None = None
        for line in self.report.splitlines():
            if line.startswith("LLMFS-THREAD:"):
                x, y, z = (int(v) for v in line.split()[1:4])
                self.thread = (x, y, z)
                break

    def explain(self) -> str:
        where = ""
        if self.thread is not None:
            where = f" in thread_position_in_grid [{', '.join(str(v) for v in self.thread)}]"
        return (
            f"kernel {self.kernel!r} accessed memory outside its buffers{where} (a missing bounds "
            f"guard?): {self.summary}"
        )


class MetalUnavailableError(MetalError):
    """The requested executor cannot run here (no Mac/Metal device, or no C++ compiler)."""

    condition = "Metal executor available"


class MetalDTypeError(DTypeError):
    """A dtype the Metal kernels do not take was sent to them: float64 (Metal has no 64-bit
    float), int64 (the kernels take 32-bit integers), or a dtype an op has no kernel for (for
    example ``exp`` of int32, which NumPy computes in float64). ``allowed`` lists what the op
    takes (``supported`` as given)."""

    dtype: object
    where: str
    supported: tuple[str, ...] = ("float32", "float16")

    def __post_init__(self) -> None:
        self.allowed = tuple(self.supported)

    @property
    def reason(self) -> str:
        """Why the dtype is refused and what to do instead."""
        name = str(self.dtype)
        if name == "float64":
            return (
                "Metal has no 64-bit floating point type, and llmfs never downcasts silently. "
                "Convert first (for example Tensor.from_numpy(t.to_numpy(), dtype='float32')), "
                "or use the numpy backend for float64"
            )
        if name == "int64":
            return (
                "the Metal kernels take 32-bit integers, and llmfs never narrows silently. "
                "Convert to int32 first, or use the numpy backend for int64"
            )
        return f"it takes {', '.join(self.supported)}. Convert first, or use the numpy backend"

    def explain(self) -> str:
        return f"{self.where} does not take {shown(self.dtype)!s}: {self.reason}"


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
