"""Log directories in object storage: any fsspec URL (`s3://bucket/prefix`, `gs://`,
`az://`, `memory://`) where a local log directory would go.

A run that logs to a URL writes its journal on this machine as any run does, in a
staging directory keyed by the URL (`staging.py`), and a shipper actor copies it to
the store as immutable segments every few seconds (`shipper.py`, `segments.py`); the
final log is put once, as one object, and the segments are then removed (also
`shipper.py`). A lock object written with the store's conditional writes keeps two
runs from continuing one journal, and a run whose lock is in doubt from buying
(`remote_lock.py`, `conditional.py`, which also keeps `listing.json` whole when runs
finish together). Resuming, the store is the truth (`sync.py`). The store is reached
through `Store` (`location.py`), whose calls are bounded in time and turn the
backend's errors into `StoreError`s (`failures.py`).

fsspec and its backends are optional (`pip install "vitals-engine[s3]"`): they are
imported only when a URL is given.
"""

from .location import Store, as_store, is_url

__all__ = ["Store", "as_store", "is_url"]
