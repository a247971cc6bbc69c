"""`vitals view`: serve the log viewer on a log directory until interrupted."""

from __future__ import annotations

import argparse

from ..storage.location import is_url
from .shared import EXIT_OK, UsageError, default_dir, default_place, import_viewer, say

__all__ = ["run_view"]


def run_view(args: argparse.Namespace) -> int:
    """`vitals view [DIR]`: serve the viewer until interrupted."""
    directory = default_place(args.dir)
    if not is_url(directory) and not default_dir(args.dir).is_dir():
        raise UsageError(f"Log directory '{directory}' not found.")
    viewer = import_viewer("launch")
    try:
        viewer.view(directory, host=args.host, port=args.port, block=True)
    except KeyboardInterrupt:
        say("Viewer stopped.")
    return EXIT_OK
