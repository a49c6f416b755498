"""Waiting for a Metal device's allocated size to settle, shared by the device tests and the
host tests' stand-in.

Metal frees a command buffer's resources on its completion queue, a moment after
``waitUntilCompleted`` has returned, so ``currentAllocatedSize()`` may still count a dropped
buffer right after a launch. A test polls instead of comparing once.
"""

from __future__ import annotations

import gc
import time
from typing import Any

#: How long a test waits for the completion queue to free what it holds (a bound, not a
#: measurement: a passing test usually returns within milliseconds).
SETTLE_TIMEOUT_S = 30.0


def wait_for_allocated_size(device: Any, expected: int, timeout: float = SETTLE_TIMEOUT_S) -> int:
    """Collects garbage and polls ``device.currentAllocatedSize()`` until it equals ``expected``
    or ``timeout`` seconds have passed; returns the last size read (so the caller's assertion
    shows it)."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        gc.collect()
        size = int(device.currentAllocatedSize())
        if size == expected or time.monotonic() >= deadline:
            return size
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
