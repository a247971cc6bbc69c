"""The log viewer: `view()` serves a log directory to a browser, `bundle()` writes a static site.

One single-page app (plain HTML, CSS and JavaScript in `static/`) reads the
same data API from the live server and from a bundle (`api.py`): the list
of logs, one log (metrics, score chart, cost, timing, the run's provider
batches, a paged sample table) and one sample (the conversation, the judge's
reasoning, metadata, errors, retries, token usage). Served live, the page
follows running evals.

`launch.py` starts the server (`server.py`), `bundle.py` writes the static
site; both reach the logs through `catalog.py` and `contents.py`.

Example:
    >>> import vitals_engine as ve
    >>> server = ve.view("logs", block=False)
    Viewer running at http://127.0.0.1:53117
    >>> server.stop()
    >>> ve.bundle("logs", "site")
    PosixPath('site')
"""
