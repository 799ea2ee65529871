"""Inputs: seeded, per-dtype, bounded-memory random tensors; scalars; blobs; structured generators."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import save_file

from fib_core.bench import generate_inputs, register_input_generator
from fib_core.bench.evaluation import inputs as inputs_mod
from fib_core.bench.evaluation import random_draws
from fib_core.bench.evaluation.inputs import InputError
from fib_core.bench.evaluation.random_draws import random_tensor
from fib_core.data.definition import Definition
from fib_core.data.workload import Workload
from fib_core.errors import LfsPointerError


def _def(inputs: dict, name: str = "t_inputs") -> Definition:
    return Definition.from_dict({
        "name": name, "op_type": "test",
        "axes": {"n": {"type": "var"}, "k": {"type": "const", "value": 3}},
        "inputs": inputs,
        "outputs": {"o": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(*args):\n    return None\n",
    })


def _wl(inputs: dict, n: int = 5, uuid: str = "wl-1") -> Workload:
    return Workload.from_dict({"uuid": uuid, "axes": {"n": n}, "inputs": inputs})


def test_same_seed_same_inputs_other_seed_or_set_differs(toy_definition, toy_workloads):
    wl = toy_workloads[1]
    a = generate_inputs(toy_definition, wl, seed=3, device="cpu", dataset_root=None)
    b = generate_inputs(toy_definition, wl, seed=3, device="cpu", dataset_root=None)
    c = generate_inputs(toy_definition, wl, seed=4, device="cpu", dataset_root=None)
    d = generate_inputs(toy_definition, wl, seed=3, device="cpu", dataset_root=None, input_set=1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[0], d[0])
    assert a[2] == -0.5  # the workload's explicit scalar, in every set
    assert a[0].shape == (64, 16) and a[0].dtype == torch.float32


def test_every_dtype_in_range():
    names = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
             "int64", "int32", "int16", "int8", "bool"]
    gen = torch.Generator().manual_seed(0)
    for name in names:
        t = random_tensor((4096,), name, gen, "cpu")
        assert t.shape == (4096,), name
        if name == "bool":
            assert set(t.int().unique().tolist()) == {0, 1}
        elif name.startswith("int"):
            info = torch.iinfo(t.dtype)
            assert max(-1024, info.min) <= int(t.min()) and int(t.max()) < min(1024, info.max + 1)
            assert t.unique().numel() > 50, name
        else:
            assert torch.isfinite(t.float()).all(), name
            assert 0.5 < t.float().std() < 1.5, name


def test_chunked_generation_is_exact_and_bounded(monkeypatch):
    """Chunks only bound the scratch memory: the values do not depend on the chunk size."""
    whole = random_tensor((3, 1000), "float8_e4m3fn", torch.Generator().manual_seed(1), "cpu")
    seen = []
    real_randn = torch.randn

    def spy(*args, **kwargs):
        seen.append(args[0])
        return real_randn(*args, **kwargs)

    monkeypatch.setattr(random_draws, "CHUNK_ELEMENTS", 256)
    monkeypatch.setattr(torch, "randn", spy)
    chunked = random_tensor((3, 1000), "float8_e4m3fn", torch.Generator().manual_seed(1), "cpu")
    assert max(seen) <= 256 and sum(seen) == 3000
    assert torch.equal(whole.view(torch.uint8), chunked.view(torch.uint8))


def test_scalars_optional_and_zero_d():
    d = _def({
        "s": {"shape": None, "dtype": "float32"},
        "i": {"shape": None, "dtype": "int32"},
        "z": {"shape": [], "dtype": "float32"},
        "opt": {"shape": ["n"], "dtype": "float32", "optional": True},
    })
    wl = _wl({"s": {"type": "random"}, "i": {"type": "scalar", "value": 7},
              "z": {"type": "random"}})
    s, i, z, opt = generate_inputs(d, wl, seed=0, device="cpu", dataset_root=None)
    assert isinstance(s, float) and i == 7 and opt is None
    assert isinstance(z, torch.Tensor) and z.dim() == 0


def test_missing_required_input_names_it():
    d = _def({"a": {"shape": ["n"], "dtype": "float32"}})
    with pytest.raises(InputError, match="no entry for input 'a'"):
        generate_inputs(d, _wl({}), seed=0, device="cpu", dataset_root=None)


def test_safetensors_relative_to_root_and_checked(tmp_path):
    d = _def({"a": {"shape": ["n", "k"], "dtype": "int32"}})
    blob = tmp_path / "blob" / "a.safetensors"
    blob.parent.mkdir()
    data = torch.arange(15, dtype=torch.int32).reshape(5, 3)
    save_file({"a": data, "wrong": data.float()}, str(blob))
    spec = {"type": "safetensors", "path": "./blob/a.safetensors", "tensor_key": "a"}
    (got,) = generate_inputs(d, _wl({"a": spec}), seed=0, device="cpu", dataset_root=tmp_path)
    assert torch.equal(got, data)
    with pytest.raises(InputError, match=r"has shape \(5, 3\), expected \(4, 3\)"):
        generate_inputs(d, _wl({"a": spec}, n=4), seed=0, device="cpu", dataset_root=tmp_path)
    bad = dict(spec, tensor_key="wrong")
    with pytest.raises(InputError, match="dtype float32, expected int32"):
        generate_inputs(d, _wl({"a": bad}), seed=0, device="cpu", dataset_root=tmp_path)
    missing = dict(spec, tensor_key="nope")
    with pytest.raises(InputError, match="no tensor 'nope'"):
        generate_inputs(d, _wl({"a": missing}), seed=0, device="cpu", dataset_root=tmp_path)


def test_lfs_pointer_and_missing_blob(tmp_path):
    d = _def({"a": {"shape": ["n"], "dtype": "float32"}})
    (tmp_path / "p.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 10\n")
    spec = {"type": "safetensors", "path": "p.safetensors", "tensor_key": "a"}
    with pytest.raises(LfsPointerError, match="git lfs pull"):
        generate_inputs(d, _wl({"a": spec}), seed=0, device="cpu", dataset_root=tmp_path)
    gone = dict(spec, path="gone.safetensors")
    with pytest.raises(InputError, match="not found"):
        generate_inputs(d, _wl({"a": gone}), seed=0, device="cpu", dataset_root=tmp_path)


def test_structured_generator_overrides_random_but_not_explicit_inputs():
    d = _def({
        "lens": {"shape": ["n"], "dtype": "int32"},
        "table": {"shape": ["n", "k"], "dtype": "int32"},
        "x": {"shape": ["n"], "dtype": "float32"},
    }, name="t_structured")
    calls = []

    @register_input_generator("t_structured")
    def _gen(definition, axes, gen, device):
        calls.append(dict(axes))
        n = axes["n"]
        lens = torch.randint(1, 10, (n,), generator=gen, dtype=torch.int32, device=device)
        table = torch.arange(n * axes["k"], dtype=torch.int32, device=device).reshape(n, -1)
        return {"lens": lens, "table": table}

    wl = _wl({"lens": {"type": "random"}, "table": {"type": "scalar", "value": 5},
              "x": {"type": "random"}})
    lens, table, x = generate_inputs(d, wl, seed=0, device="cpu", dataset_root=None)
    assert calls == [{"n": 5, "k": 3}]
    assert 1 <= int(lens.min()) and int(lens.max()) < 10  # from the generator
    assert torch.equal(table, torch.full((5, 3), 5, dtype=torch.int32))  # explicit scalar kept
    again = generate_inputs(d, wl, seed=0, device="cpu", dataset_root=None)
    assert torch.equal(again[0], lens) and torch.equal(again[2], x)


def test_generator_output_is_validated():
    d = _def({"lens": {"shape": ["n"], "dtype": "int32"}}, name="t_bad_gen")
    register_input_generator("t_bad_gen")(lambda definition, axes, gen, device: {
        "lens": torch.zeros(axes["n"] + 1, dtype=torch.int32)})
    with pytest.raises(InputError, match=r"'lens' is int32 \(6,\), expected int32 \(5,\)"):
        generate_inputs(d, _wl({"lens": {"type": "random"}}), seed=0, device="cpu",
                        dataset_root=None)
    d2 = d.model_copy(update={"name": "t_bad_gen2"})
    register_input_generator("t_bad_gen2")(lambda *a: {"nope": torch.zeros(1)})
    with pytest.raises(InputError, match="produced 'nope'"):
        generate_inputs(d2, _wl({"lens": {"type": "random"}}), seed=0, device="cpu",
                        dataset_root=None)


def test_the_timing_only_sets_are_made_in_a_thread_and_equal_the_seeded_sets(
    monkeypatch, tmp_path, toy_definition, toy_workloads
):
    """The sets the judge may check are made at once; the sets only timed come from a thread
    during the correctness run (here, with a generator that draws one set at a time, exactly
    what generate_inputs makes for their index, in order); an error there fails the workload
    as an inputs error, like before."""
    from fib_core.bench.config import BenchmarkConfig
    from fib_core.bench.evaluation import evaluator as evaluate
    from fib_core.bench.evaluation.environment import EnvironmentInfo
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.failures import Failed
    from fib_core.bench.evaluation.inputs import generate_inputs
    from fib_core.bench.evaluation.reference_sets import checked_indices

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    cfg = BenchmarkConfig(device="cpu", warmup_runs=1, iterations=5, num_trials=2)
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cpu", hardware="cpu"))
    workload = toy_workloads[0]
    prep = ev._prepare(toy_definition, workload, cfg, None)
    early = len(checked_indices(prep.total_sets, cfg.num_input_sets, cfg.num_trials))
    # per trial: its warm-up call and its 5 timed calls, each with a set of its own
    assert prep.total_sets == cfg.num_input_sets + (1 + 5) * 2 > early == len(prep.sets)
    prep.complete()
    assert len(prep.sets) == prep.total_sets and prep.more is None
    for k, got in enumerate(prep.sets):
        want = generate_inputs(
            toy_definition, workload, seed=0, device="cpu", dataset_root=None, input_set=k
        )
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b) if torch.is_tensor(a) else a == b

    def broken(*args, first=0, **kwargs):
        from fib_core.errors import FibError

        raise FibError(f"set {first} cannot be made")

    monkeypatch.setattr(evaluate, "generate_timing_sets", broken)
    prep = ev._prepare(toy_definition, workload, cfg, None)
    with pytest.raises(Failed, match="inputs: set .* cannot be made"):
        prep.complete()


def test_the_generator_fingerprint_covers_the_shared_helpers(monkeypatch):
    """Cached references are keyed by the generator's fingerprint: a change in a shared helper
    of fib_core.dataset.generators (which the definition's own generate() calls) must change
    it, or a warm run would compare against outputs of other inputs."""
    import inspect

    from fib_core.dataset import generators

    name = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
    before = inputs_mod.generator_fingerprint(name)
    real = inspect.getsource

    def edited(obj):
        text = real(obj)
        return text + "\n# a helper draws other numbers now\n" if obj is generators else text

    monkeypatch.setattr(inspect, "getsource", edited)
    inputs_mod._source_hash.cache_clear()  # computed once per process otherwise
    try:
        assert inputs_mod.generator_fingerprint(name) != before
    finally:
        inputs_mod._source_hash.cache_clear()


def test_a_generator_that_takes_wanted_is_told_which_inputs_come_from_the_workload():
    """Inputs the workload gives (scalars, blobs) are not wanted from the generator, so it can
    skip making them; one without the keyword is called as before."""
    d = _def(
        {"lens": {"shape": ["n"], "dtype": "int32"}, "x": {"shape": ["n"], "dtype": "float32"}},
        name="t_wanted",
    )
    seen = []

    @register_input_generator("t_wanted")
    def make(definition, axes, gen, device, wanted=frozenset()):
        seen.append(set(wanted))
        out = {"x": torch.zeros(axes["n"])}
        if "lens" in wanted:
            out["lens"] = torch.ones(axes["n"], dtype=torch.int32)
        return out

    lens, x = generate_inputs(
        d, _wl({"lens": {"type": "scalar", "value": 3}, "x": {"type": "random"}}), seed=0,
        device="cpu", dataset_root=None,
    )
    assert seen[-1] == {"x"} and torch.equal(lens, torch.full((5,), 3, dtype=torch.int32))
    lens, x = generate_inputs(
        d, _wl({"lens": {"type": "random"}, "x": {"type": "random"}}), seed=0, device="cpu",
        dataset_root=None,
    )
    assert seen[-1] == {"lens", "x"} and torch.equal(lens, torch.ones(5, dtype=torch.int32))


def _batch_def(name: str) -> Definition:
    return _def(
        {
            "x": {"shape": ["n"], "dtype": "float32"},
            "unit": {"shape": ["n", "k"], "dtype": "float32"},
            "alpha": {"shape": None, "dtype": "float32"},
            "fixed": {"shape": ["n"], "dtype": "int32"},
        },
        name=name,
    )


def _batch_wl() -> Workload:
    return _wl({
        "x": {"type": "random"}, "unit": {"type": "random"}, "alpha": {"type": "random"},
        "fixed": {"type": "scalar", "value": 7},
    })


def test_timing_sets_are_drawn_many_at_once_when_the_generator_takes_sets():
    """One generator call makes a whole draw of timed-only sets: each set is a slice of it, in
    the definition's shapes, with its own contents, the generator's structure kept and the
    workload's scalars as they are; the same seed gives the same sets."""
    calls = []

    @register_input_generator("t_sets")
    def make(definition, axes, gen, device, sets=None):
        calls.append(sets)
        lead = () if sets is None else (sets,)
        rows = torch.randn((*lead, axes["n"], axes["k"]), generator=gen)
        return {"unit": rows / rows.norm(dim=-1, keepdim=True)}

    d, wl = _batch_def("t_sets"), _batch_wl()
    sets = inputs_mod.generate_timing_sets(
        d, wl, seed=0, device="cpu", dataset_root=None, first=10, count=6
    )
    assert calls == [6]  # one draw for all six
    assert len(sets) == 6
    for x, unit, alpha, fixed in sets:
        assert x.shape == (5,) and x.dtype == torch.float32
        assert unit.shape == (5, 3) and torch.allclose(unit.norm(dim=-1), torch.ones(5))
        assert isinstance(alpha, float)
        assert torch.equal(fixed, torch.full((5,), 7, dtype=torch.int32))
    for i in range(6):
        for j in range(i + 1, 6):
            assert not torch.equal(sets[i][0], sets[j][0])
            assert not torch.equal(sets[i][1], sets[j][1])
    again = inputs_mod.generate_timing_sets(
        d, wl, seed=0, device="cpu", dataset_root=None, first=10, count=6
    )
    assert all(torch.equal(a[1], b[1]) for a, b in zip(sets, again, strict=True))
    # A checked set (generate_inputs) never shares its contents with a timed-only one.
    checked = generate_inputs(d, wl, seed=0, device="cpu", dataset_root=None, input_set=10)
    assert not any(torch.equal(checked[1], s[1]) for s in sets)


def test_timing_sets_are_drawn_in_chunks_of_bounded_size():
    calls = []

    @register_input_generator("t_sets_chunks")
    def make(definition, axes, gen, device, sets=None):
        calls.append(sets)
        lead = () if sets is None else (sets,)
        return {"unit": torch.randn((*lead, axes["n"], axes["k"]), generator=gen)}

    d, wl = _batch_def("t_sets_chunks"), _batch_wl()
    per_set = 5 * 4 + 5 * 3 * 4 + 5 * 4  # x, unit and fixed, in bytes
    sets = inputs_mod.generate_timing_sets(
        d, wl, seed=0, device="cpu", dataset_root=None, first=4, count=7, chunk_bytes=3 * per_set
    )
    assert calls == [3, 3, 1] and len(sets) == 7
    units = [s[1] for s in sets]
    assert all(not torch.equal(units[i], units[j]) for i in range(7) for j in range(i + 1, 7))


def test_timing_sets_without_the_sets_keyword_are_the_usual_sets():
    @register_input_generator("t_no_sets")
    def make(definition, axes, gen, device):
        return {"unit": torch.randn((axes["n"], axes["k"]), generator=gen)}

    d, wl = _batch_def("t_no_sets"), _batch_wl()
    sets = inputs_mod.generate_timing_sets(
        d, wl, seed=1, device="cpu", dataset_root=None, first=3, count=2
    )
    for k, got in zip((3, 4), sets, strict=True):
        one = generate_inputs(d, wl, seed=1, device="cpu", dataset_root=None, input_set=k)
        assert torch.equal(got[0], one[0]) and torch.equal(got[1], one[1]) and got[2] == one[2]


def test_a_draw_of_the_wrong_shape_is_a_clear_error():
    @register_input_generator("t_sets_bad")
    def make(definition, axes, gen, device, sets=None):
        return {"unit": torch.zeros((axes["n"], axes["k"]))}  # forgot the sets axis

    d, wl = _batch_def("t_sets_bad"), _batch_wl()
    with pytest.raises(InputError, match=r"'unit' is float32 \(5, 3\), expected float32 \(4, 5, 3\)"):
        inputs_mod.generate_timing_sets(d, wl, seed=0, device="cpu", dataset_root=None, first=0, count=4)


def test_a_generator_object_that_cannot_be_hashed_still_works():
    """A generator may be any callable, even an unhashable object (a dataclass instance with
    __call__): whether it takes a keyword is then worked out each time."""

    @dataclasses.dataclass
    class Make:
        scale: float = 2.0

        def __call__(self, definition, axes, gen, device, sets=None):
            lead = () if sets is None else (sets,)
            return {"unit": self.scale * torch.ones((*lead, axes["n"], axes["k"]))}

    register_input_generator("t_unhashable")(Make())
    d, wl = _batch_def("t_unhashable"), _batch_wl()
    (x, unit, alpha, fixed) = generate_inputs(d, wl, seed=0, device="cpu", dataset_root=None)
    assert torch.equal(unit, torch.full((5, 3), 2.0))
    sets = inputs_mod.generate_timing_sets(
        d, wl, seed=0, device="cpu", dataset_root=None, first=2, count=3
    )
    assert len(sets) == 3 and all(torch.equal(s[1], torch.full((5, 3), 2.0)) for s in sets)
