"""`bundle()`: the viewer and a log directory as a static site any web server can host.

Layout of the output directory:

```
index.html, robots.txt
assets/app.js, assets/compare.js, assets/transcript.js, assets/app.css
logs/<the log files, relative paths kept>, logs/listing.json
api/logs.json, api/logs/<file>/summaries.json, api/logs/<file>/samples/<key>/<epoch>.json
api/logs/<file>/batches.json
```

The `api/` documents are the live server's (see `api.py`), written once, so
the same page reads them from any static host (no live updates there).
The catalog and the API are imported when a bundle is written, not with the
package.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import ConfigError
from ..config import DEFAULT_LOG_DIR, log_dir
from ..storage.location import as_store, is_url

if TYPE_CHECKING:
    from .catalog import Catalog

__all__ = ["bundle"]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _build(catalog: Catalog, out: Path) -> None:
    import msgspec

    from ..log.listing import LISTING, overview
    from . import api
    from .site import ASSETS, ROBOTS, STATIC_DIR

    shutil.copyfile(STATIC_DIR / "index.html", out / "index.html")
    (out / "assets").mkdir()
    for name in ASSETS:
        shutil.copyfile(STATIC_DIR / name, out / "assets" / name)
    _write(out / "robots.txt", ROBOTS)

    headers = catalog.headers()
    for relative in headers:
        source = catalog.path(relative)
        if source is not None:
            target = out / "logs" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    listing = {relative: overview(header) for relative, header in headers.items()}
    _write(out / "logs" / LISTING, msgspec.json.encode(listing))

    _write(out / "api" / "logs.json", api.encode(api.logs_document(catalog, live=False)))
    for relative in headers:
        document = catalog.summaries(relative)
        if document is None:
            continue
        _write(out / api.summaries_path(relative), api.encode(document))
        batches = catalog.batches(relative)
        if batches is not None:
            _write(out / api.batches_path(relative), api.encode(batches))
        for row in document["rows"]:
            sample = catalog.sample(relative, row["id"], row["epoch"])
            if sample is not None:
                _write(out / api.sample_path(relative, row["id"], row["epoch"]), sample)


def _is_bundle(path: Path) -> bool:
    """Whether `path` is a directory an earlier `bundle()` wrote (or an empty one)."""
    if not path.is_dir():
        return False
    if not any(path.iterdir()):
        return True  # nothing in it to lose
    return (
        (path / "index.html").is_file()
        and (path / "assets").is_dir()
        and (path / "api" / "logs.json").is_file()
    )


def bundle(
    log_dir: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the viewer and the logs of `log_dir` as a static site into `output_dir`.

    `log_dir` defaults to `ve.log_dir()`, else "logs"; `output_dir` to
    `<log dir name>-bundle` in the current directory (beside the log directory
    when the current directory is inside it), which a later call replaces if it
    is still a bundle. The site works from any static web server
    (`python -m http.server -d <output_dir>`, GitHub Pages, S3). Returns
    `output_dir`.

    `overwrite=True` replaces only an earlier bundle (a directory holding
    `index.html`, `assets/` and `api/logs.json`) or an empty directory: any
    other directory or file is left alone.

    Raises `ConfigError` when `log_dir` does not exist, holds no logs, or
    `output_dir` exists and `overwrite` is False, or it is not a bundle (or
    would hold `log_dir`).

    Example:
        >>> bundle("logs", "site")
        PosixPath('site')
        >>> bundle("logs")
        PosixPath('logs-bundle')
    """
    given = log_dir if log_dir is not None else _default_log_dir()
    catalog = _catalog(given)
    source = given if is_url(given) else Path(given)
    if not catalog.headers():
        raise ConfigError(f"The log directory '{source}' doesn't contain any logs.")
    if output_dir is None:
        out = default_output(catalog.root) if not is_url(given) else _named(str(given))
        overwrite = True  # our own folder: an earlier bundle there is replaced, nothing else
    else:
        out = Path(output_dir)
    if out.exists() and not overwrite:
        raise ConfigError(
            f"'{out}' already exists. Choose another output directory or use overwrite=True."
        )
    resolved = out.resolve()
    if resolved == catalog.root or resolved in catalog.root.parents:
        raise ConfigError(
            f"'{out}' holds the log directory '{source}'; choose another output directory."
        )
    if resolved.exists() and not _is_bundle(resolved):
        raise ConfigError(
            f"'{out}' is not a bundle (no index.html, assets/ and api/logs.json), so it won't "
            "be deleted to make way for one; choose another output directory."
        )
    resolved.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".vitals-bundle-", dir=resolved.parent))
    try:
        _build(catalog, staging)
        if resolved.exists():
            shutil.rmtree(resolved)  # an earlier bundle (checked above)
        staging.chmod(0o755)
        staging.rename(resolved)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def default_output(log_root: Path) -> Path:
    """Where a bundle of the (resolved) log directory goes by default: `<name>-bundle` in
    the current directory, or beside the log directory when the current one is inside it.

    Example:
        >>> default_output(Path("/home/me/evals/logs"))  # in /home/me/evals
        PosixPath('logs-bundle')
    """
    here = Path.cwd().resolve()
    name = f"{log_root.name or 'vitals'}-bundle"
    if here == log_root or log_root in here.parents:
        return log_root.parent / name
    return Path(name)


def _catalog(given: str | os.PathLike[str]) -> Catalog:
    """The catalog of a local log directory, or of a store's logs (copied here as the
    bundle needs them)."""
    from .catalog import Catalog

    store = as_store(given)
    if store is not None:
        from .stored_source import StoredSource

        store.check()
        stored = StoredSource(store)
        catalog = Catalog(stored.root, source=stored)
    else:
        if not Path(given).is_dir():
            raise ConfigError(f"`log_dir` '{given}' doesn't exist.")
        catalog = Catalog(Path(given))
    catalog.refresh()
    return catalog


def _named(url: str) -> Path:
    """The default bundle of a store's logs: `<its last folder>-bundle` in the current
    directory."""
    return Path(f"{url.rstrip('/').rsplit('/', 1)[-1] or 'vitals'}-bundle")


def _default_log_dir() -> str:
    return log_dir() or DEFAULT_LOG_DIR
