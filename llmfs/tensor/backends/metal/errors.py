"""Errors of the Metal backend and its CPU emulator (defined with every other error in
:mod:`llmfs.tensor.errors`, so the whole hierarchy is one module; re-exported here).

``KernelCompileError`` carries the compiler's own text (Metal's or the C++ compiler's);
``KernelLintError`` lists the MSL rules a source breaks that C++ would have let through;
``KernelLaunchError`` reports a failed dispatch (Metal's command-buffer error text, or the
emulator's); ``KernelMemoryError`` is an out-of-bounds access caught by AddressSanitizer;
``MetalDTypeError`` refuses a dtype a kernel does not take (float64 above all, which Metal does
not have, and int64), by name.
"""

from __future__ import annotations

from llmfs.tensor.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelLintError,
    KernelMemoryError,
    KernelNotFoundError,
    MetalDTypeError,
    MetalError,
    MetalUnavailableError,
)

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
