"""The C++ compiler behind the emulator: which one, with which flags, and the build cache.

The emulator needs clang++ (``$LLMFS_CXX`` when set, else ``clang++``): the shim uses clang's
address spaces (so mixing ``device``, ``constant``, ``threadgroup`` and ``thread`` pointers fails
to compile, as in Metal, which is clang-based), its ``ext_vector_type`` vectors with swizzles,
and ``__fp16`` with native half arithmetic (every half operation rounds, as on a GPU). A
compiler that lacks any of these is refused with :class:`MetalUnavailableError` naming it. Builds
go to a cache folder keyed by a hash of everything that affects the result (source, shim,
compiler, flags), never into the source tree: ``$LLMFS_CACHE_DIR/msl`` when that variable is set,
else ``~/.cache/llmfs/msl``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmfs.tensor.backends.metal.errors import KernelCompileError, MetalUnavailableError

#: Folder holding the shim header named ``metal_stdlib``.
SHIM_DIR = Path(__file__).resolve().parent / "include"

#: Bump when the generated launcher or flags change meaning, to invalidate old builds.
BUILD_VERSION = "2"

_CANDIDATES = ("clang++",)
_COMPILE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Compiler:
    """A usable C++ compiler: absolute path, family (``clang`` or ``gcc``), ``--version`` line,
    and whether it has a native ``_Float16``."""

    path: str
    family: str
    version: str
    native_half: bool
    f16c: bool = False  # the CPU converts half <-> float in hardware (x86 F16C)

    def flags(self, *, sanitize: bool = False) -> list[str]:
        """Flags for building emulator code. Fast math stays off, like the Metal path, and
        floating-point contraction is off so a*b+c rounds twice, as the kernels are written;
        half arithmetic is native (each operation rounds to half); a variable-length array is
        an error, as in Metal."""
        flags = [
            "-std=c++17",
            "-O1" if sanitize else "-O2",
            "-fno-fast-math",
            "-ffp-contract=off",
            *HALF_FLAGS,
            "-Werror=vla-extension",
            "-Wno-unknown-attributes",
            "-Wno-ignored-attributes",
            "-ferror-limit=50",
            *(["-mf16c"] if self.f16c else []),
            "-pthread",
            "-I",
            str(SHIM_DIR),
        ]
        if sanitize:
            flags += ["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]
        return flags


#: clang flags making ``__fp16`` an arithmetic type whose every operation rounds to half.
HALF_FLAGS = ("-Xclang", "-fnative-half-type", "-Xclang", "-fallow-half-arguments-and-returns")

#: What the shim needs from the compiler, compiled once when the compiler is chosen.
_PROBE = """
typedef __fp16 half;
typedef half half4 __attribute__((ext_vector_type(4)));
typedef float float4 __attribute__((ext_vector_type(4)));
half f(__attribute__((address_space(1))) half* p, half b) { return p[0] * b + (half)1.0f; }
float4 g(float4 v) { return v.wzyx + v.x; }
"""


def cache_dir() -> Path:
    """The build cache folder (created on demand): ``$LLMFS_CACHE_DIR/msl`` or
    ``~/.cache/llmfs/msl``."""
    root = os.environ.get("LLMFS_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "llmfs"
    path = base / "msl"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(args: list[str], *, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, input=input_text, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S
    )


def _describe(path: str) -> Compiler | None:
    try:
        version = _run([path, "--version"])
    except (OSError, subprocess.SubprocessError):
        return None
    if version.returncode != 0:
        return None
    first = (version.stdout.splitlines() or ["unknown"])[0].strip()
    family = "clang" if "clang" in version.stdout.lower() else "gcc"
    if family != "clang":
        return Compiler(path, family, first, False)
    try:
        args = [path, "-x", "c++", "-std=c++17", *HALF_FLAGS, "-fsyntax-only", "-"]
        result = _run(args, input_text=_PROBE)
        native_half = result.returncode == 0
    except (OSError, subprocess.SubprocessError):
        native_half = False
    return Compiler(path, family, first, native_half, _cpu_has_f16c())


def _cpu_has_f16c() -> bool:
    """True on an x86 CPU whose flags list F16C (half conversions in hardware: the same IEEE
    rounding as the shim's software conversion, about ten times faster)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return re.search(r"^flags\s*:.*\bf16c\b", flags, re.MULTILINE) is not None


@functools.lru_cache(maxsize=1)
def find_compiler() -> Compiler:
    """The compiler the emulator uses (see the module text).

    Raises :class:`MetalUnavailableError` naming what was tried, and why it does not do, when
    no suitable clang++ runs.
    """
    requested = os.environ.get("LLMFS_CXX")
    names = (requested,) if requested else _CANDIDATES
    refused: list[str] = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            refused.append(f"{name}: not found")
            continue
        compiler = _describe(path)
        if compiler is None:
            refused.append(f"{name}: does not run")
        elif compiler.family != "clang":
            refused.append(f"{name}: {compiler.version} is not clang")
        elif not compiler.native_half:
            refused.append(f"{name}: {compiler.version} lacks __fp16 arithmetic or vectors")
        else:
            return compiler
    raise MetalUnavailableError(
        f"the Metal emulator needs clang++ (address spaces, vector types and half arithmetic "
        f"as Metal has them) and none suitable runs here ({'; '.join(refused)}); install it "
        f"(Debian/Ubuntu: apt-get install clang), or set LLMFS_CXX to its path"
    )


@functools.lru_cache(maxsize=1)
def sanitizer_available() -> bool:
    """True when the compiler can build and run an AddressSanitizer executable here."""
    try:
        compiler = find_compiler()
    except MetalUnavailableError:
        return False
    with tempfile.TemporaryDirectory(prefix="llmfs-asan-") as tmp:
        exe = Path(tmp) / "probe"
        try:
            build = _run(
                [compiler.path, "-x", "c++", "-fsanitize=address", "-", "-o", str(exe)],
                input_text="int main() { return 0; }\n",
            )
            if build.returncode != 0:
                return False
            return subprocess.run([str(exe)], capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


def build_key(text: str, compiler: Compiler, flags: list[str], kind: str) -> str:
    """Hash naming a build: everything that can change the produced binary goes in."""
    digest = hashlib.sha256()
    shim = (SHIM_DIR / "metal_stdlib").read_bytes()
    for part in (BUILD_VERSION, kind, compiler.path, compiler.version, " ".join(flags)):
        digest.update(part.encode() + b"\0")
    digest.update(shim + b"\0")
    digest.update(text.encode())
    return digest.hexdigest()[:32]


def build(
    text: str, *, kind: str, what: str, sanitize: bool = False, extra: Sequence[str] = ()
) -> Path:
    """Compiles C++ ``text`` into the cache (a shared library for ``kind="so"``, an executable
    for ``kind="exe"``) unless an identical build is already there; returns its path.
    ``extra``: flags added after the usual ones (the counting build's instrumentation).

    The build is written under a temporary name and renamed into place, so concurrent processes
    never load a half-written file. Raises :class:`KernelCompileError` with the compiler's text.
    """
    compiler = find_compiler()
    flags = [*compiler.flags(sanitize=sanitize), *extra]
    if kind == "so":
        flags = [*flags, "-shared", "-fPIC", "-fvisibility=hidden"]
    key = build_key(text, compiler, flags, kind)
    folder = cache_dir()
    target = folder / (f"{key}.so" if kind == "so" else f"{key}.exe")
    if target.exists():
        return target
    source = folder / f"{key}.{os.getpid()}.cpp"
    partial = folder / f"{key}.{os.getpid()}.partial"
    source.write_text(text)
    try:
        result = _run([compiler.path, *flags, str(source), "-o", str(partial)])
    except subprocess.TimeoutExpired:
        source.unlink(missing_ok=True)
        raise KernelCompileError(what, f"{compiler.path} ran over {_COMPILE_TIMEOUT_S} s") from None
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        log = result.stderr or result.stdout
        raise KernelCompileError(what, log.replace(str(source), "kernel.metal"))
    os.replace(partial, target)
    source.replace(folder / f"{key}.cpp")  # kept beside the build for anyone debugging it
    return target


__all__ = [
    "BUILD_VERSION",
    "HALF_FLAGS",
    "SHIM_DIR",
    "Compiler",
    "build",
    "build_key",
    "cache_dir",
    "find_compiler",
    "sanitizer_available",
]
