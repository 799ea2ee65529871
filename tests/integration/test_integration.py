"""Patching machinery on a fake library, and the FlashInfer adapters on a fake FlashInfer."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
import torch

from fib_core.apply import ApplyConfig, ApplyRuntime, set_apply_hook, set_runtime
from fib_core.data import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    Solution,
    Trace,
    TraceSet,
    Workload,
)
from fib_core.integration import (
    ArgBinder,
    ContextStore,
    PatchManager,
    PatchSpec,
    get_manager,
    install_flashinfer_integrations,
)
from fib_core.tracer import kit_definitions

FAKE_LIB = """
def double(x, factor=2):
    return x * factor


class Wrapper:
    def plan(self, n):
        self.n = n

    def run(self, x):
        return x + self.n

    @staticmethod
    def version():
        return "1.0"
"""


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    pkg = tmp_path / "fakelib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(FAKE_LIB)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    yield
    get_manager().unpatch_all()
    set_runtime(None)
    set_apply_hook(None)


def test_patch_function_method_and_staticmethod_then_restore(fake_module):
    import fakelib.ops as ops

    manager = PatchManager()
    calls = []

    def factory(spec, original):
        def wrapper(*args, **kwargs):
            calls.append(spec.name)
            return original(*args, **kwargs)

        return wrapper

    assert manager.patch(PatchSpec("fakelib.ops.double", "function", "double"), factory)
    assert manager.patch(PatchSpec("fakelib.ops.Wrapper.run", "method", "run"), factory)
    assert manager.patch(PatchSpec("fakelib.ops.Wrapper.version", "method", "ver"), factory)
    assert ops.double(3) == 6
    w = ops.Wrapper()
    w.plan(10)
    assert w.run(1) == 11 and ops.Wrapper.version() == "1.0" and w.version() == "1.0"
    assert calls == ["double", "run", "ver", "ver"]
    # patching the same path again keeps a single wrapper
    assert manager.patch(PatchSpec("fakelib.ops.double", "function", "double"), factory)
    ops.double(1)
    assert calls[-1] == "double" and len(calls) == 5
    manager.unpatch_all()
    assert manager.patched == []
    assert ops.double(3) == 6 and w.run(1) == 11 and len(calls) == 5
    assert isinstance(ops.Wrapper.__dict__["version"], staticmethod)


def test_missing_targets_return_false(fake_module):
    manager = PatchManager()
    factory = lambda spec, original: original  # noqa: E731
    assert not manager.patch(PatchSpec("fakelib.ops.nothing", "function", "x"), factory)
    assert not manager.patch(PatchSpec("nolib_at_all.mod.fn", "function", "x"), factory)
    assert not manager.patch(PatchSpec("fakelib.ops.Missing.run", "method", "x"), factory)
    assert not manager.patch(PatchSpec("fakelib.ops.double", "method", "x"), factory)  # no class
    assert manager.patched == []
    with pytest.raises(ValueError):
        PatchSpec("fakelib.ops.double", "property", "x")


def test_arg_binder_and_context_store():
    def f(q, k, scale=None, *, flag=False):
        return None

    binder = ArgBinder.from_callable(f)
    assert ArgBinder.from_callable(f) is binder
    assert binder.bind((1, 2), {}) == {"q": 1, "k": 2, "scale": None, "flag": False}
    assert binder.bind((1,), {"k": 2, "flag": True})["flag"] is True
    with pytest.raises(TypeError):
        binder.bind((1,), {})
    with pytest.raises(TypeError):
        binder.bind((1, 2), {"q": 3})

    store = ContextStore()

    class W:
        pass

    a, b = W(), W()
    store.get(a)["n"] = 1
    assert store.get(a) == {"n": 1} and store.get(b) == {}
    assert store.pop(a) == {"n": 1} and store.get(a) == {}
    store.get(7)["x"] = 1  # an int cannot be weakly referenced: kept by identity
    assert store.get(7) == {"x": 1}


def test_install_without_flashinfer_is_a_silent_no_op():
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("FlashInfer is installed here")
    assert install_flashinfer_integrations() == []
    assert get_manager().patched == []


FAKE_FLASHINFER_DECODE = """
def gated_delta_rule_decode_pretranspose(q, k, v, state, A_log, a, dt_bias, b, scale=None,
                                         output=None, use_qk_l2norm=True, initial_state=None,
                                         initial_state_indices=None):
    out = v.clone().fill_(-1)
    state.fill_(-1)
    return out, state
"""

FAKE_SOLUTION = """
def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    output.fill_(7)
    new_state.fill_(scale)
"""

DECODE = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture
def fake_flashinfer(tmp_path, monkeypatch):
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real FlashInfer is installed")
    pkg = tmp_path / "fake" / "flashinfer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from .gdn_decode import gated_delta_rule_decode_pretranspose\n"
    )
    (pkg / "gdn_decode.py").write_text(textwrap.dedent(FAKE_FLASHINFER_DECODE))
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    yield
    for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
        del sys.modules[name]


def decode_args(batch):
    return dict(
        q=torch.randn(batch, 1, 4, 128).bfloat16(),
        k=torch.randn(batch, 1, 4, 128).bfloat16(),
        v=torch.randn(batch, 1, 8, 128).bfloat16(),
        state=torch.zeros(batch, 8, 128, 128),
        A_log=torch.zeros(8),
        a=torch.zeros(batch, 1, 8).bfloat16(),
        dt_bias=torch.zeros(8),
        b=torch.zeros(batch, 1, 8).bfloat16(),
    )


def decode_trace_set(batch: int) -> TraceSet:
    ts = TraceSet(root=None)
    ts.add_definition(kit_definitions()[DECODE])
    ts.add_solution(
        Solution.from_dict(
            {
                "name": "fake-decode",
                "definition": DECODE,
                "author": "tests",
                "spec": {
                    "language": "python",
                    "target_hardware": ["cpu"],
                    "entry_point": "main.py::run",
                    "destination_passing_style": True,
                },
                "sources": [{"path": "main.py", "content": textwrap.dedent(FAKE_SOLUTION)}],
            }
        )
    )
    ev = Evaluation(
        status=EvaluationStatus.PASSED,
        log="",
        environment=Environment(hardware="cpu"),
        timestamp="2026-01-01T00:00:00",
        correctness=Correctness(0.0, 0.0),
        performance=Performance(0.01, 0.02, 2.0),
    )
    workload = Workload(
        uuid="w", axes={"batch_size": batch}, inputs={n: RandomInput() for n in ("q",)}
    )
    ts.add_traces(
        [Trace(definition=DECODE, workload=workload, solution="fake-decode", evaluation=ev)]
    )
    return ts


def test_flashinfer_gdn_decode_adapter_routes_traces_and_falls_back(fake_flashinfer):
    installed = install_flashinfer_integrations()
    assert installed == [
        "flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose",
        "flashinfer.gated_delta_rule_decode_pretranspose",
    ]
    assert install_flashinfer_integrations() == installed  # idempotent
    import flashinfer

    seen = []
    set_apply_hook(lambda name, kw: seen.append((name, kw["q"].shape[0], kw["scale"])))
    # no runtime: FlashInfer's own function runs, the hook still sees the call
    args = decode_args(2)
    out, state = flashinfer.gated_delta_rule_decode_pretranspose(**args)
    assert out.unique().tolist() == [-1.0] and state.unique().tolist() == [-1.0]
    assert seen == [(DECODE, 2, pytest.approx(128**-0.5))]
    # with a runtime: the recorded solution runs at batch 2, state updated in place
    set_runtime(ApplyRuntime(decode_trace_set(2), ApplyConfig()))
    args = decode_args(2)
    state_in = args["state"]
    out, state = flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose(**args, scale=0.5)
    assert state is state_in and state.unique().tolist() == [0.5]
    assert out.shape == (2, 1, 8, 128) and out.unique().tolist() == [7.0]
    # an unrecorded batch size, or a call outside the definition, runs FlashInfer's own code
    out, _ = flashinfer.gated_delta_rule_decode_pretranspose(**decode_args(3))
    assert out.unique().tolist() == [-1.0]
    pooled = decode_args(2)
    pooled["initial_state_indices"] = torch.zeros(2, dtype=torch.int32)
    out, _ = flashinfer.gated_delta_rule_decode_pretranspose(**pooled)
    assert out.unique().tolist() == [-1.0]
    assert hasattr(flashinfer.gated_delta_rule_decode_pretranspose, "__wrapped__")
    get_manager().unpatch_all()
    assert not hasattr(flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose, "__wrapped__")
    assert not hasattr(flashinfer.gated_delta_rule_decode_pretranspose, "__wrapped__")
