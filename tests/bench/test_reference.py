"""Reference: exec'd from the definition, run on clones, outputs cached on disk per key."""

from __future__ import annotations

import pytest
import torch

from fib_core.bench import generate_inputs
from fib_core.bench.evaluation import reference as ref_mod
from fib_core.bench.evaluation.reference import ReferenceCache, reference_key, reference_outputs


def test_reference_runs_on_clones_and_is_cached(toy_definition, toy_workloads, tmp_path,
                                                monkeypatch):
    wl = toy_workloads[0]
    inputs = generate_inputs(toy_definition, wl, seed=0, device="cpu", dataset_root=None)
    cache = ReferenceCache(tmp_path)
    calls = []
    real = ref_mod.run_reference
    monkeypatch.setattr(ref_mod, "run_reference", lambda d, i: calls.append(1) or real(d, i))
    first, hit1 = reference_outputs(toy_definition, wl, inputs, seed=0, device="cpu",
                                    input_set=0, cache=cache)
    second, hit2 = reference_outputs(toy_definition, wl, inputs, seed=0, device="cpu",
                                     input_set=0, cache=cache)
    assert (hit1, hit2) == (False, True) and len(calls) == 1
    assert torch.equal(first[0], 1.5 * inputs[0] + inputs[1]) and torch.equal(first[0], second[0])
    assert list((tmp_path / "reference" / "toy_axpy").glob("*.safetensors"))


def test_reference_mutating_its_inputs_does_not_disturb_ours(toy_definition, toy_workloads):
    mutating = toy_definition.model_copy(
        update={"reference": "def run(x, y, alpha):\n    x.mul_(alpha)\n    return x + y\n"},
    )
    inputs = generate_inputs(mutating, toy_workloads[0], seed=0, device="cpu", dataset_root=None)
    before = inputs[0].clone()
    ref_mod.run_reference(mutating, inputs)
    assert torch.equal(inputs[0], before)


def test_cache_key_changes_with_what_changes_the_outputs(toy_definition, toy_workloads):
    wl = toy_workloads[0]
    base = reference_key(toy_definition, wl, seed=0, device_kind="cpu", input_set=0)
    assert base == reference_key(toy_definition, wl, seed=0, device_kind="cpu", input_set=0)
    others = {
        reference_key(toy_definition, wl, seed=1, device_kind="cpu", input_set=0),
        reference_key(toy_definition, wl, seed=0, device_kind="cuda", input_set=0),
        reference_key(toy_definition, wl, seed=0, device_kind="cpu", input_set=1),
        reference_key(toy_definition, toy_workloads[1], seed=0, device_kind="cpu", input_set=0),
        reference_key(toy_definition.model_copy(update={"reference": toy_definition.reference + "\n#"}),
                      wl, seed=0, device_kind="cpu", input_set=0),
    }
    assert base not in others and len(others) == 5


def test_keys_of_several_sets_are_the_keys_cached_files_already_carry(toy_definition,
                                                                      toy_workloads):
    """Keys made many at a time keep the documented recipe (a change would strand every cached
    reference): sha256 of the sorted JSON of the parts, 32 hex digits."""
    import hashlib
    import json

    from fib_core.bench.evaluation.inputs import generator_fingerprint
    from fib_core.bench.evaluation.reference import INPUTS_VERSION, reference_keys

    wl = toy_workloads[0]
    keys = reference_keys(toy_definition, wl, seed=0, device_kind="cpu", input_sets=[0, 3])
    parts = {"definition": toy_definition.content_hash(), "uuid": wl.uuid, "seed": 0,
             "device": "cpu", "set": 3, "workload": wl.to_dict(),
             "generator": generator_fingerprint(toy_definition.name),
             "inputs_version": INPUTS_VERSION}
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    assert keys[1] == hashlib.sha256(text.encode()).hexdigest()[:32]
    assert keys == [reference_key(toy_definition, wl, seed=0, device_kind="cpu", input_set=k)
                    for k in (0, 3)]


def test_unwritable_cache_only_warns(toy_definition, toy_workloads, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = ReferenceCache(blocker)
    wl = toy_workloads[0]
    inputs = generate_inputs(toy_definition, wl, seed=0, device="cpu", dataset_root=None)
    out, hit = reference_outputs(toy_definition, wl, inputs, seed=0, device="cpu", input_set=0,
                                 cache=cache)
    assert not hit and out[0].shape == (4, 16)
    assert "cannot write the reference cache" in caplog.text


def test_a_reference_that_fails_to_load_is_a_reference_failure(toy_definition):
    from fib_core.dataset.references import ReferenceFailure, reference_run
    from fib_core.errors import FibError

    broken = toy_definition.model_copy(
        update={"reference": "raise ValueError('bad import')\n" + toy_definition.reference}
    )
    with pytest.raises(ReferenceFailure, match=r"toy_axpy.*fails to load: ValueError: bad import"):
        reference_run(broken)
    assert issubclass(ReferenceFailure, FibError) and ReferenceFailure is not ReferenceError
    assert reference_run(toy_definition) is reference_run(toy_definition)  # exec'd once
