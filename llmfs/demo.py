"""``llmfs demo``: the trace table of the [2, 3] example tensor, printed in the terminal.

Prints the trace table (source view, reshape, transpose, slice, materialized slice, and the three
refused requests) with the text renderer, then the materialized slice's mapping table. Needs only
``llmfs.tensor``: no JupyterLab, no matplotlib.
"""

from __future__ import annotations

import argparse

from llmfs.widgets.examples import seed_fixture, seed_trace
from llmfs.widgets.text import render_offsets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--offsets`` also prints the transpose's offset table and storage strip."""
    parser.add_argument(
        "--offsets",
        action="store_true",
        help="also print the offset table of the transposed view",
    )


def main(args: argparse.Namespace) -> int:
    """Prints the table; returns 0."""
    source = seed_fixture()
    print("source: shape [2, 3], strides [3, 1], storage [10, 11, 12, 20, 21, 22]\n")
    print(repr(seed_trace()))
    if getattr(args, "offsets", False):
        print("\nbase.transpose(0, 1):")
        print(render_offsets(source.transpose(0, 1), "base"))
    return 0
