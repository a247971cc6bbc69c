"""A griffe extension for the API reference: `Example:` sections read as examples.

The package's docstrings head their examples `Example:`, which Google style allows
(as does Sphinx's napoleon), but griffe reads only `Examples:` as an examples section
and takes `Example:` for an admonition: its `>>>` lines would render as nested block
quotes instead of code. This renames the heading, in the docstring griffe parses only
(never in the source), so both spellings render as a highlighted session.

mkdocs.yml loads it: `plugins.mkdocstrings.handlers.python.options.extensions`.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: A section heading `Example:` at the docstring's own indentation (a top-level section).
_EXAMPLE_HEADING = re.compile(r"^Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename each top-level `Example:` section of a docstring to `Examples:`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE_HEADING.sub("Examples:", obj.docstring.value)
