"""Definition parsing, helpers, and the errors a broken definition file gets."""

from __future__ import annotations

import pytest

from fib_core.data import AxisConst, AxisVar, Definition, TensorSpec
from fib_core.errors import FibError, SchemaError


def test_helpers_describe_the_contract(build):
    d = Definition.from_dict(build.definition())
    assert d.const_axes == {"hidden": 64}
    assert d.var_axes == ["tokens", "pages"]
    assert d.var_axis_bindings == {"tokens": ("x", 0), "pages": ("table", 1)}
    assert d.input_names == ["x", "table", "scale"]
    assert d.output_names == ["y"]
    assert d.input_shapes({"tokens": 3, "pages": 5}) == {
        "x": (3, 64), "table": (3, 5), "scale": None,
    }
    assert d.output_shapes({"tokens": 3, "pages": 5}) == {"y": (3, 64)}
    assert d.reference_signature() == ["x", "table", "scale"]
    assert d.inputs["table"].optional and not d.inputs["x"].optional
    assert d.inputs["scale"].is_scalar


def test_zero_dim_shape_is_not_a_scalar(build):
    raw = build.definition()
    raw["inputs"]["scale"]["shape"] = []
    d = Definition.from_dict(raw)
    assert not d.inputs["scale"].is_scalar
    assert d.input_shapes({"tokens": 1, "pages": 1})["scale"] == ()


def test_round_trip_keeps_unknown_fields_in_format_order(build):
    raw = build.definition()
    raw["future_field"] = {"nested": [1, 2]}
    raw["axes"]["hidden"]["unit"] = "elements"
    raw["inputs"]["x"]["layout"] = "row-major"
    out = Definition.from_dict(raw).to_dict()
    assert out == raw
    # The format's key order, then the keys the format does not name.
    assert list(out) == list(raw)
    assert list(out["axes"]["hidden"]) == ["type", "value", "unit"]
    # Any other key order reads the same and is written in the format's order.
    shuffled = {k: raw[k] for k in reversed(list(raw))}
    assert Definition.from_dict(shuffled).to_dict() == raw
    assert list(Definition.from_dict(shuffled).to_dict()) == list(raw)


def test_defaults_are_omitted_when_the_file_omits_them(build):
    d = Definition.from_dict(build.definition())
    out = d.to_dict()
    assert "optional" not in out["inputs"]["x"]
    assert out["inputs"]["table"]["optional"] is True
    assert "description" not in out["axes"]["pages"]


def test_constructed_definition_serialises_in_format_order():
    d = Definition(
        name="n", op_type="o", axes={"a": AxisVar(), "b": AxisConst(2)},
        inputs={"x": TensorSpec(["a", "b"], "float32")},
        outputs={"y": TensorSpec(["a"], "float32")},
        reference="def run(x):\n    return x\n",
        description="d",
    )
    assert list(d.to_dict()) == ["name", "description", "op_type", "axes", "inputs", "outputs",
                                 "reference"]
    assert Definition.from_dict(d.to_dict()) == d


def test_constraints_use_axes_and_tensors(build):
    torch = pytest.importorskip("torch")
    d = Definition.from_dict(build.definition())
    assert d.check_constraints({"tokens": 2, "pages": 3}) == []  # tensor constraint skipped
    assert d.check_constraints({"tokens": 2, "pages": 0}) == ["pages >= 1"]
    good = {"table": torch.zeros(2, 3, dtype=torch.int32)}
    bad = {"table": torch.zeros(2, 4, dtype=torch.int32)}
    assert d.check_constraints({"tokens": 2, "pages": 3}, good) == []
    assert d.check_constraints({"tokens": 2, "pages": 3}, bad) == ["table.shape[1] == pages"]
    # An optional input passed as None cannot be judged, so it is not reported.
    assert d.check_constraints({"tokens": 2, "pages": 3}, {"table": None}) == []


def test_missing_var_axis_value_is_named(build):
    d = Definition.from_dict(build.definition())
    with pytest.raises(SchemaError, match=r"axes\.pages.*var axis 'pages'"):
        d.input_shapes({"tokens": 3})


def test_content_hash_tracks_the_contract(build):
    a = Definition.from_dict(build.definition())
    b = Definition.from_dict(build.definition())
    assert a.content_hash() == b.content_hash()
    raw = build.definition()
    raw["reference"] = raw["reference"].replace("x * scale", "scale * x")
    assert Definition.from_dict(raw).content_hash() != a.content_hash()


def _broken(build, mutate) -> str:
    raw = build.definition()
    mutate(raw)
    with pytest.raises(SchemaError) as info:
        Definition.from_dict(raw)
    assert isinstance(info.value, FibError)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_unknown_dtype_names_field_and_choices(build):
    def mutate(raw):
        raw["inputs"]["x"]["dtype"] = "fp8"

    message = _broken(build, mutate)
    assert message.startswith("inputs.x.dtype: found 'fp8', expected one of 'float32', ")
    assert "'float8_e4m3fn'" in message and message.endswith("'int8' or 'bool'")


def test_shape_naming_unknown_axis(build):
    def mutate(raw):
        raw["outputs"]["y"]["shape"] = ["tokens", "hiden"]

    message = _broken(build, mutate)
    assert message.startswith("outputs.y.shape[1]: found 'hiden', expected an axis declared")
    assert "tokens, pages, hidden" in message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r.pop("op_type"), "missing the required key 'op_type'"),
        (lambda r: r["axes"]["hidden"].update(value=-1), "axes.hidden.value: found -1"),
        (lambda r: r["axes"]["hidden"].update(value=True), "axes.hidden.value: found True"),
        (lambda r: r["axes"]["pages"].update(type="dynamic"), "axes.pages.type: found 'dynamic'"),
        (lambda r: r["inputs"]["x"].update(shape="tokens"), "inputs.x.shape: found 'tokens'"),
        (lambda r: r["inputs"]["x"].update(optional="yes"), "inputs.x.optional: found 'yes'"),
        (lambda r: r.update(constraints=["pages >="]), "constraints[0]: found 'pages >='"),
        (lambda r: r.update(reference="def go(x):\n    pass\n"), "a top-level function named 'run'"),
        (lambda r: r.update(reference="def run(:\n"), "reference: found 'syntax error at line 1"),
        (lambda r: r["outputs"].update(x={"shape": None, "dtype": "int32"}),
         "outputs.x: found 'x', expected input and output names to differ"),
        (lambda r: r.update(tags="fast"), "tags: found 'fast', expected a list"),
        (lambda r: r.update(tags=["fast", 3]), "tags[1]: found 3, expected a string"),
        (lambda r: r.pop("reference"), "missing the required key 'reference'"),
        (lambda r: r["axes"]["hidden"].pop("value"), "axes.hidden: missing the required key 'value'"),
        (lambda r: r["axes"]["hidden"].pop("type"), "axes.hidden: missing the required key 'type'"),
    ],
)
def test_malformed_definitions(build, mutate, expected):
    assert expected in _broken(build, mutate)
