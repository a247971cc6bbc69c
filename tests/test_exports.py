"""The public face of the package."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import vitals_engine as ve
from vitals_engine import _errors

ROOT = Path(__file__).resolve().parents[1]
#: The page that draws the tree of errors ("Every error is a `ve.VitalsError`").
ERRORS_PAGE = ROOT / "docs" / "guide" / "running-at-scale.md"


def test_all_is_sorted_and_complete():
    """__all__ lists every public name once, sorted, and each one exists."""
    assert ve.__all__ == sorted(set(ve.__all__))
    for name in ve.__all__:
        assert hasattr(ve, name), name
    public = {n for n in dir(ve) if not n.startswith("_")} - set(ve.__all__)
    modules = {n for n in public if type(getattr(ve, n)).__name__ == "module"}
    assert public == modules


def exported_errors() -> dict[str, type[BaseException]]:
    """Every exception class `vitals_engine` exports, by name."""
    found = {}
    for name in ve.__all__:
        value = getattr(ve, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            found[name] = value
    return found


def test_every_error_is_a_vitals_error():
    """All exported exceptions share the root VitalsError."""
    errors = exported_errors()
    assert len(errors) >= 24
    for error in errors.values():
        assert issubclass(error, ve.VitalsError), error
    assert issubclass(ve.RateLimitError, ve.ProviderError)
    assert ve.RateLimitError("slow down", retry_after=2.5).retry_after == 2.5


def package_errors() -> set[type[BaseException]]:
    """The errors users can receive: every subclass of VitalsError the package defines
    (its modules imported, so each one is)."""
    for info in pkgutil.walk_packages(ve.__path__, "vitals_engine."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    found, todo = set(), [ve.VitalsError]
    while todo:
        error = todo.pop()
        found.add(error)
        todo += [e for e in error.__subclasses__() if e.__module__.startswith("vitals_engine")]
    return found


def test_every_error_of_the_package_is_exported():
    """Each VitalsError the package defines is exported (users catch what they receive)."""
    assert package_errors() == set(exported_errors().values())


def drawn_tree(text: str) -> dict[str, str]:
    """The tree drawn in `text` (lines `├── Name` / `└── Name` under their parent, by
    column): each error's name -> its parent's name."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if line.strip() == "VitalsError":
            stack = [(-1, "VitalsError")]
            continue
        found = re.search(r"[├└]── (\w+)", line)
        if not found or not stack:
            continue
        column = found.start()
        while stack[-1][0] >= column:
            stack.pop()
        parents[found[1]] = stack[-1][1]
        stack.append((column, found[1]))
    return parents


def test_the_error_trees_draw_every_error():
    """`_errors.py`'s docstring draws every exported error under its real parent, and the
    docs' tree ("Every error is a `ve.VitalsError`", in docs/guide/running-at-scale.md)
    names every one."""
    errors = exported_errors()
    parents = drawn_tree(_errors.__doc__ or "")
    assert set(parents) | {"VitalsError"} == set(errors)
    for name, parent in parents.items():
        assert errors[name].__bases__ == (errors[parent],), name
    page = ERRORS_PAGE.read_text()
    assert "Every error is a `ve.VitalsError`:" in page, f"{ERRORS_PAGE} draws no tree"
    tree = page.split("Every error is a `ve.VitalsError`:", 1)[1].split("```", 2)[1]
    named = re.sub(r"\([^)]*\)", "", tree)  # the notes in parentheses left out
    assert set(re.findall(r"\b[A-Z]\w+", named)) == set(errors)


def test_package_is_typed():
    """The package ships py.typed so type checkers read its annotations."""
    from importlib.resources import files

    assert files("vitals_engine").joinpath("py.typed").is_file()


# -- what public functions return ------------------------------------------------------------

#: Special methods whose results users receive (`async with`, `for`, indexing, calling).
RECEIVED = {"__aenter__", "__enter__", "__iter__", "__aiter__", "__anext__", "__getitem__"}


def package_classes() -> dict[str, set[type]]:
    """Every class the package defines, by name (a name may be defined twice)."""
    classes: dict[str, set[type]] = {}
    for info in pkgutil.walk_packages(ve.__path__, "vitals_engine."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                classes.setdefault(name, set()).add(value)
    return classes


def public_callables() -> dict[str, object]:
    """Every function users reach from `vitals_engine`: its functions, those of its
    modules, and the public methods and properties of its classes."""
    found: dict[str, object] = {}
    for name in ve.__all__:
        value = getattr(ve, name)
        if inspect.ismodule(value):
            for attribute, member in vars(value).items():
                if not attribute.startswith("_") and inspect.isfunction(member):
                    found[f"{name}.{attribute}"] = member
        elif inspect.isclass(value):
            for attribute, member in vars(value).items():
                if attribute.startswith("_") and attribute not in RECEIVED:
                    continue
                if isinstance(member, property):
                    member = member.fget
                elif isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if inspect.isfunction(member):
                    found[f"{name}.{attribute}"] = member
        elif callable(value):
            found[name] = value
    return found


def returned_names(function: object) -> set[str]:
    """The names in a function's return annotation (as written: annotations are strings)."""
    try:
        annotation = inspect.signature(function).return_annotation  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return set()
    if annotation is inspect.Signature.empty:
        return set()
    if not isinstance(annotation, str):
        annotation = getattr(annotation, "__name__", repr(annotation))
    return {word.rsplit(".", 1)[-1] for word in re.findall(r"[A-Za-z_][\w.]*", annotation)}


def test_every_type_a_public_function_returns_is_exported():
    """What a public function or method returns (Task.estimate_cost()'s Estimate,
    stream_async()'s SampleStream, view()'s ViewServer ...) is exported, so users can
    name it in their own annotations."""
    classes = package_classes()
    missing = {}
    for where, function in public_callables().items():
        for name in returned_names(function):
            if name in classes and getattr(ve, name, None) not in classes[name]:
                missing.setdefault(name, []).append(where)
    assert not missing, missing


def test_chat_by_name_is_typed_with_every_constructors_options():
    """`ve.chat("provider/model", ...)` takes, typed, every keyword option of the HTTP
    constructors it names: `ChatOptions` and each one's own (`api`, `reasoning_model`,
    `prompt_cache`)."""
    from vitals_engine.chats import constructors

    options = inspect.signature(ve.chat).parameters["options"]
    assert options.annotation == "Unpack[AnyChatOptions]"
    typed = constructors.AnyChatOptions.__optional_keys__
    assert typed >= constructors.ChatOptions.__optional_keys__
    for make in (ve.chat_openai, ve.chat_anthropic, ve.chat_google_gemini, ve.chat_ollama):
        own = {
            name
            for name, parameter in inspect.signature(make).parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert own <= typed, make.__name__
