"""`vitals bundle`: write the log viewer and the logs of a directory as a static site."""

from __future__ import annotations

import argparse
import os

from ..storage.location import is_url
from .shared import EXIT_OK, UsageError, default_dir, default_place, import_viewer

__all__ = ["run_bundle"]


def run_bundle(args: argparse.Namespace) -> int:
    """`vitals bundle [LOG_DIR]`: write the static site and say where."""
    log_dir = default_place(args.log_dir)
    if not is_url(log_dir) and not default_dir(args.log_dir).is_dir():
        raise UsageError(f"Log directory '{log_dir}' not found.")
    viewer = import_viewer("bundle")
    written = viewer.bundle(log_dir, args.output_dir, args.overwrite)
    where = written if written is not None else args.output_dir
    if where is not None:
        print(f"Bundle '{os.fspath(where)}' created.")
    return EXIT_OK
