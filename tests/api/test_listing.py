"""Every module, name and signature of the organizers' API imports from ``fib_core``.

The listing (``organizers_api.md``) is the organizers' public surface with ``fib_core`` for
``flashinfer_bench``; each line is one test. Modules of packages this checkout does not have
yet (``apply``, ``tracer``, ``integration``) are skipped with that reason, not passed.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import functools
import importlib
import importlib.util
import inspect
import os

import pydantic
import pytest

from .listing import Entry, parameters, parse_listing

ENTRIES = parse_listing()
# Lines marked "# gap: ..." in the listing are known differences: reported as skips with their
# reason. FIB_API_FULL=1 checks them too (to see which gaps were closed).
FULL = os.environ.get("FIB_API_FULL") == "1"
OPTIONAL_PACKAGES = ("fib_core.apply", "fib_core.tracer", "fib_core.integration")


def _module(name: str):
    for package in OPTIONAL_PACKAGES:
        if (name == package or name.startswith(package + ".")) and importlib.util.find_spec(
            package
        ) is None:
            pytest.skip(f"{package} is not part of this checkout")
    return importlib.import_module(name)


def _resolve(entry: Entry):
    """(owner class or None, the object, the raw attribute as stored on the class)."""
    module = _module(entry.module)
    owner_name, _, attr = entry.name.rpartition(".")
    if not owner_name:
        assert hasattr(module, attr), f"{entry.module} has no {attr!r}"
        return None, getattr(module, attr), getattr(module, attr)
    assert hasattr(module, owner_name), f"{entry.module} has no class {owner_name!r}"
    owner = getattr(module, owner_name)
    static = inspect.getattr_static(owner, attr, None)
    assert static is not None, f"{entry.module}.{owner_name} has no {attr!r}"
    return owner, getattr(owner, attr), static


def _listed_params(entry: Entry, drop_cls: bool) -> list[inspect.Parameter]:
    args = parameters(entry)
    out: list[inspect.Parameter] = []
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        default = ... if i >= first_default else inspect.Parameter.empty
        out.append(
            inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    if args.vararg:
        out.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        default = ... if d is not None else inspect.Parameter.empty
        out.append(inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=default))
    if args.kwarg:
        out.append(inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    if drop_cls and out and out[0].name == "cls":
        out = out[1:]
    return out


def signature_problems(listed: list[inspect.Parameter], actual: inspect.Signature) -> list[str]:
    """Why a call written against ``listed`` could fail against ``actual`` (empty: compatible)."""
    P = inspect.Parameter
    params = list(actual.parameters.values())
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params}
    kinds = {p.kind for p in params}
    problems, matched = [], set()
    listed_positional = [p for p in listed if p.kind == P.POSITIONAL_OR_KEYWORD]
    for i, want in enumerate(listed_positional):
        got = positional[i] if i < len(positional) else None
        if got is None or got.name != want.name or got.kind != P.POSITIONAL_OR_KEYWORD:
            problems.append(f"parameter {i + 1} should be {want.name!r}, found {got}")
            continue
        matched.add(got.name)
        if want.default is not P.empty and got.default is P.empty:
            problems.append(f"{want.name!r} needs a default")
    for want in listed:
        if want.kind == P.KEYWORD_ONLY:
            got = by_name.get(want.name)
            if got is None or got.kind not in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD):
                if P.VAR_KEYWORD not in kinds:
                    problems.append(f"keyword {want.name!r} is not accepted")
                continue
            matched.add(got.name)
            if want.default is not P.empty and got.default is P.empty:
                problems.append(f"{want.name!r} needs a default")
        elif want.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) and want.kind not in kinds:
            problems.append(f"{'*' if want.kind == P.VAR_POSITIONAL else '**'}{want.name} missing")
    for p in params:
        if p.name in matched or p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        if p.default is P.empty:
            problems.append(f"extra parameter {p.name!r} has no default")
    return problems


def _check_class(entry: Entry) -> None:
    _, cls, _ = _resolve(entry)
    assert inspect.isclass(cls), f"{entry.name} is not a class"
    if "dataclass" in entry.decorators:
        assert dataclasses.is_dataclass(cls), f"{entry.name} is not a dataclass"
        if "frozen=True" in entry.line:
            assert cls.__dataclass_params__.frozen, f"{entry.name} is not frozen"
    base = entry.params.strip("()").strip()
    if not base or base == "ABC":
        return
    if base == "Enum":
        assert issubclass(cls, enum.Enum)
        return
    if base == "BaseModel":
        assert issubclass(cls, pydantic.BaseModel), f"{entry.name} is not a pydantic model"
        return
    expected = getattr(builtins, base, None) or getattr(_module(entry.module), base, None)
    if expected is None:  # a base listed in another module
        owners = [e for e in ENTRIES if e.kind == "class" and e.name == base]
        assert owners, f"base {base!r} of {entry.name} is not in the listing"
        expected = getattr(_module(owners[0].module), base)
    assert issubclass(cls, expected), f"{entry.name} is not a subclass of {base}"


def _check_def(entry: Entry) -> None:
    owner, obj, static = _resolve(entry)
    if {"property", "cached_property"} & set(entry.decorators):
        assert isinstance(static, (property, functools.cached_property)), (
            f"{entry.name} should be an attribute (property), found {static!r}"
        )
        return
    assert callable(obj), f"{entry.name} is not callable"
    is_classmethod = isinstance(static, classmethod)
    if "classmethod" in entry.decorators:
        assert is_classmethod, f"{entry.name} should be a classmethod"
    signature = inspect.signature(obj)
    if owner is not None and not is_classmethod and not isinstance(static, staticmethod):
        params = list(signature.parameters.values())[1:]  # self
        signature = signature.replace(parameters=params)
    problems = signature_problems(_listed_params(entry, drop_cls=True), signature)
    assert not problems, f"{entry.line}\n  fib_core has {signature}\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id + f"[{e.kind}]" for e in ENTRIES])
def test_listed_name(entry: Entry) -> None:
    if entry.gap and not FULL:
        pytest.skip(f"known gap: {entry.gap}")
    if entry.kind == "export":
        module = _module(entry.module)
        if entry.module == "fib_core":  # top-level names re-exported from a sibling package
            _module(module._LAZY[entry.name])
        assert hasattr(module, entry.name), f"{entry.module} does not export {entry.name}"
    elif entry.kind == "class":
        _check_class(entry)
    elif "overload" in entry.decorators:
        _resolve(entry)  # the call form's own checks are on the implementation's line
    else:
        _check_def(entry)


def test_every_listed_module_imports() -> None:
    for module in sorted({e.module for e in ENTRIES}):
        entries = [e for e in ENTRIES if e.module == module]
        if all(e.gap for e in entries) and not FULL:
            continue  # a module the kit does not have (each of its lines says why)
        if any(
            module.startswith(p) and importlib.util.find_spec(p) is None for p in OPTIONAL_PACKAGES
        ):
            continue
        importlib.import_module(module)


def test_gaps_are_few_and_outside_the_core() -> None:
    gaps = [e for e in ENTRIES if e.gap]
    assert len(gaps) < 60
    core = ("fib_core.data", "fib_core.compile", "fib_core.bench", "fib_core.cli", "fib_core.utils")
    assert not [e.line for e in gaps if e.module.startswith(core)]


def test_listing_covers_the_documented_surface() -> None:
    modules = {e.module for e in ENTRIES}
    assert len(ENTRIES) > 200 and len(modules) > 40
    for name in (
        "fib_core.data.json_codec",
        "fib_core.compile.registry",
        "fib_core.bench.runners.mp_runner",
        "fib_core.utils",
        "fib_core.cli.main",
    ):
        assert name in modules


@pytest.mark.parametrize(
    ("listed", "actual", "ok"),
    [
        ("(a, b=1)", "(a, b=2, *, c=None)", True),
        ("(a, b=1)", "(a, b)", False),  # the default is gone
        ("(a, b)", "(b, a)", False),  # order matters for positional calls
        ("(a, b)", "(a, b, c)", False),  # a new required parameter breaks callers
        ("(a, *, k)", "(a, k=None)", True),
        ("(**kwargs)", "(*args, **kwargs)", True),
        ("(**kwargs)", "(*args)", False),
        ("(a)", "(x)", False),
    ],
)
def test_signature_rule(listed: str, actual: str, ok: bool) -> None:
    entry = Entry("m", "def", "f", params=listed)
    namespace: dict = {}
    exec(f"def g{actual}: pass", namespace)
    problems = signature_problems(
        _listed_params(entry, drop_cls=False), inspect.signature(namespace["g"])
    )
    assert (not problems) is ok, problems


def test_parser_reads_methods_and_decorators() -> None:
    text = "## m.x\nexports: A, b\n@dataclass(frozen=True) class A(Base)\n@classmethod def A.f(cls, s: str) -> 'A'\n"
    entries = parse_listing(text)
    assert [(e.kind, e.name) for e in entries] == [
        ("export", "A"),
        ("export", "b"),
        ("class", "A"),
        ("def", "A.f"),
    ]
    assert entries[2].decorators == ("dataclass",) and entries[2].params == "(Base)"
    assert [a.arg for a in parameters(entries[3]).args] == ["cls", "s"]
    assert isinstance(parameters(entries[3]), ast.arguments)
