"""Fixtures of the exercise engine's tests (see :mod:`exercisekit`)."""

from __future__ import annotations

from exercisekit import attempts_log

__all__ = ["attempts_log"]
