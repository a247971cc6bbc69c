"""The API reference (docs/reference/*.md) documents every public name, each with its example.

The pages are mkdocstrings directives (`::: vitals_engine.Task`) that the site build
renders from the docstrings. These checks read the pages and the docstrings only (no
build), so a public name added without a reference entry, or without an example, fails
here in milliseconds.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import vitals_engine as ve
from vitals_engine import statistics, testing

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"

#: The modules whose `__all__` the reference covers.
PUBLIC_MODULES: tuple[ModuleType, ...] = (ve, statistics, testing)

#: A directive: `::: identifier` alone on its line.
DIRECTIVE = re.compile(r"^:::[ \t]+(\S+)[ \t]*$", re.MULTILINE)

#: A docstring's example section (`Example:` or `Examples:`, as Google style writes them)
#: and, below it, a `>>>` line.
EXAMPLE = re.compile(r"^[ \t]*Examples?:[ \t]*\n(?:[ \t]*\n)*[ \t]+>>> ", re.MULTILINE)


def public_names() -> list[tuple[str, object]]:
    """Every public name of the modules the reference covers: `module.name` -> object."""
    return [
        (f"{module.__name__}.{name}", getattr(module, name))
        for module in PUBLIC_MODULES
        for name in module.__all__
    ]


def directives() -> dict[str, list[str]]:
    """Each reference page's directives, in order."""
    return {
        page.name: DIRECTIVE.findall(page.read_text(encoding="utf-8"))
        for page in sorted(REFERENCE.glob("*.md"))
    }


def resolve(identifier: str) -> object:
    """The object a directive names, imported as griffe would find it."""
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(identifier)


def documented() -> list[object]:
    """What the directives document: each object named, and the members rendered under it
    (a module's public names, a class's attributes)."""
    found: list[object] = []
    for identifiers in directives().values():
        for identifier in identifiers:
            target = resolve(identifier)
            found.append(target)
            if inspect.ismodule(target):
                names = getattr(target, "__all__", None) or [
                    n for n in vars(target) if not n.startswith("_")
                ]
                found += [getattr(target, name) for name in names]
            elif inspect.isclass(target):
                found += list(vars(target).values())
    return found


def test_the_reference_has_pages_of_directives():
    """The pages are found and hold directives (a change of syntax would otherwise test
    nothing)."""
    pages = directives()
    assert "index.md" in pages
    assert sum(len(found) for found in pages.values()) >= 100


def test_every_directive_names_something_that_exists():
    """A directive naming a removed or renamed object fails here, not only in the build."""
    missing = []
    for page, identifiers in directives().items():
        for identifier in identifiers:
            try:
                resolve(identifier)
            except (LookupError, AttributeError):
                missing.append(f"{page}: {identifier}")
    assert missing == []


def test_every_public_name_has_a_reference_entry():
    """Each name of `vitals_engine.__all__`, `vitals_engine.statistics.__all__` and
    `vitals_engine.testing.__all__` is in a `:::` directive of docs/reference/*.md, or is
    rendered under one (a module's names, a class's members)."""
    covered = documented()
    missing = [name for name, value in public_names() if not any(value is c for c in covered)]
    assert missing == [], f"add these to a page of docs/reference/: {missing}"


def test_each_entry_is_documented_once():
    """No object has two entries (their anchors would clash, and readers would not know
    which to read)."""
    seen: dict[int, str] = {}
    twice = []
    for page, identifiers in directives().items():
        for identifier in identifiers:
            key = id(resolve(identifier))
            if key in seen:
                twice.append(f"{identifier} ({page}; also {seen[key]})")
            seen[key] = f"{page}: {identifier}"
    assert twice == []


@pytest.mark.parametrize(("name", "value"), public_names(), ids=[n for n, _ in public_names()])
def test_each_public_name_has_an_example(name: str, value: object):
    """Each public name's docstring has an `Example:` section of `>>>` lines, which the
    reference renders as code (its own docstring: a class does not borrow its base's)."""
    doc = value.__doc__ if inspect.isclass(value) else inspect.getdoc(value)
    assert doc, f"{name} has no docstring"
    assert EXAMPLE.search(inspect.cleandoc(doc)), f"{name}'s docstring has no example"


def test_every_reference_page_is_in_the_nav():
    """Each page of docs/reference/ is in mkdocs.yml's nav (under "API reference")."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:", 1)[1]
    reference = nav.split("- API reference:", 1)[1]
    missing = [
        page.name
        for page in sorted(REFERENCE.glob("*.md"))
        if f"reference/{page.name}" not in reference
    ]
    assert missing == []


def test_every_public_docstring_example_is_python():
    """The reference shows the docstrings' `>>>` examples: each one (and each public
    method's) is Python that compiles (top-level `await` allowed), so a typo in an
    example fails here, not in a reader's paste."""
    import ast
    import doctest
    import inspect

    import vitals_engine as ve
    import vitals_engine.statistics as statistics
    import vitals_engine.testing as testing

    def documented(module):
        for name in module.__all__:
            obj = getattr(module, name)
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for member in vars(obj):
                    if not member.startswith("_"):
                        yield f"{module.__name__}.{name}.{member}", getattr(obj, member)

    parser = doctest.DocTestParser()
    broken, seen = [], 0
    for where, obj in (pair for m in (ve, statistics, testing) for pair in documented(m)):
        for example in parser.get_examples(inspect.getdoc(obj) or ""):
            seen += 1
            try:
                compile(example.source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            except SyntaxError as exc:
                broken.append(f"{where}: {example.source.strip()[:60]!r}: {exc.msg}")
    assert seen > 250
    assert broken == []
