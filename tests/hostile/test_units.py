"""The pieces that keep a hostile worker's data from hurting the engine, without processes:
framing limits and deadlines, bounded logs, the signed cache, the audit, the verdict rules."""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
import torch

from fib_core.bench.containment.source_audit import audit_sources
from fib_core.bench.evaluation.logs import clip_text, read_bounded
from fib_core.bench.evaluation.verdicts import TaskLedger, final_result, validate_result
from fib_core.bench.evaluation.wire import (
    WireError,
    decode_values,
    encode_values,
    read_frame,
    send_frame,
    validate_values,
)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_frame_round_trips_with_its_tensors(pair):
    a, b = pair
    outs = [torch.randn(3, 5).to(torch.bfloat16), 2.5, float("nan"), torch.arange(4)]
    specs, parts = encode_values(outs)
    assert len(parts) == 2  # one host copy per tensor, sent as is (never joined)
    total = sum(p.nbytes for p in parts)
    send_frame(a, {"type": "check", "outputs": specs}, parts)
    header, got_blob = read_frame(b, time.monotonic() + 5, max_blob=total)
    assert len(got_blob) == total == 3 * 5 * 2 + 4 * 8
    back = decode_values(validate_values(header["outputs"], len(got_blob), 4), got_blob, "cpu")
    assert torch.equal(back[0], outs[0]) and back[0].dtype == torch.bfloat16
    assert back[1] == 2.5 and back[2] != back[2] and torch.equal(back[3], outs[3])


def test_a_parent_message_carries_its_blob_outside_the_pickle(pair):
    """The parent relays a worker's outputs to the judge as raw bytes after the pickled
    request: the child gets (object, blob), and a message without one an empty blob."""
    from fib_core.bench.evaluation.wire import recv_message, send_object

    a, b = pair
    payload = [memoryview(b"abc"), memoryview(bytearray(b"defg"))]
    send_object(a, ("check", None, 3), payload)
    send_object(a, ("forget",))
    assert recv_message(b) == (("check", None, 3), bytearray(b"abcdefg"))
    assert recv_message(b) == (("forget",), bytearray())


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"\x80\x04garbage that is not a frame at all", "bad magic"),
        (struct.pack("<4sIQ", b"FIB1", 16, 2 << 30) + b"{" * 16, "exceeds"),
        (struct.pack("<4sIQ", b"FIB1", 1 << 31, 0), "exceeds"),
        (struct.pack("<4sIQ", b"FIB1", 1000, 0) + b'{"type":', "incomplete message"),
        (struct.pack("<4sIQ", b"FIB1", 3, 0) + b"[1]", "not an object"),
        (struct.pack("<4sIQ", b"FIB1", 3, 0) + b"NaN", "malformed message header"),
    ],
)
def test_malformed_frames_raise_promptly(pair, raw, needle):
    a, b = pair
    a.sendall(raw)
    started = time.monotonic()
    with pytest.raises(WireError, match=needle):
        read_frame(b, time.monotonic() + 1.0, max_blob=1 << 20)
    assert time.monotonic() - started < 10  # bounded by the deadline, never blocked


def test_nothing_sent_is_a_timeout_not_an_error(pair):
    assert read_frame(pair[1], time.monotonic() + 0.2) is None


def test_output_descriptions_are_checked_before_use():
    good = [{"kind": "tensor", "dtype": "float32", "shape": [2, 3], "nbytes": 24}]
    assert validate_values(good, 24, 1) == good
    for bad, size in [
        ([{**good[0], "nbytes": 25}], 25),
        ([{**good[0], "dtype": "object"}], 24),
        ([{**good[0], "shape": [-1, 3]}], 24),
        (good, 48),
        ([{"kind": "pickle", "data": "..."}], 0),
        (good * 2, 48),
    ]:
        with pytest.raises(WireError):
            validate_values(bad, size, 1)


def test_a_100_mb_line_is_cut_when_read_back(tmp_path):
    log = tmp_path / "worker.log"
    log.write_bytes(b"start\n" + b"x" * (100 << 20) + b"\nlast words\n")
    text = read_bounded(log)
    assert len(text) < 40_000
    assert "bytes omitted" in text and "last words" in text and text.startswith("start")
    assert len(clip_text("y" * 10_000_000)) < 40_000


def test_signed_cache_loads_verified_views_and_prefetches_side_by_side(tmp_path):
    """Outputs come back equal whatever their dtype (tensors are views of the verified bytes,
    scalars numbers); a prefetched file that was rewritten is refused like any other, and a
    prefetch is used once."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a", "b", "c", "s"])
    outs = [torch.randn(4, 3).bfloat16(), torch.arange(5), torch.zeros(0, 2), 2.5]
    for key in ("k0", "k1", "k2"):
        cache.store_outputs(definition, key, outs)
    path = cache._path(definition, "k1", ".safetensors")
    path.write_bytes(path.read_bytes()[:-2] + b"xx")
    cache.prefetch_outputs(definition, ["k0", "k1", "k2", "missing"])
    assert len(cache._current) == 3
    for key in ("k0", "k2"):
        got = cache.load_outputs(definition, key, "cpu")
        assert got[0].dtype == torch.bfloat16 and torch.equal(got[0], outs[0])
        assert torch.equal(got[1], outs[1]) and got[2].shape == (0, 2) and got[3] == 2.5
    assert cache.load_outputs(definition, "k1", "cpu") is None
    assert cache._current == {}


def test_a_judge_on_a_gpu_reads_outputs_into_page_locked_buffers(tmp_path, monkeypatch):
    """Output files are read through the cache's PinnedPool (NumPy views of page-locked
    memory on a GPU); latency records stay bytes. Loads from such a buffer equal what was
    stored."""
    from types import SimpleNamespace

    import numpy as np

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.integrity import ensure_key

    asked = []

    def fake_pinned(size, pool=None):
        asked.append(pool is not None)
        return np.zeros(size, dtype=np.uint8) if pool is not None else bytearray(size)

    monkeypatch.setattr(signed_cache, "host_buffer", fake_pinned)
    cache = signed_cache.SignedReferenceCache(ensure_key(tmp_path), tmp_path,
                                           pin_device="cuda:0")
    definition = SimpleNamespace(name="d", output_names=["a", "s"])
    outs = [torch.randn(4, 3), 1.5]
    cache.store_outputs(definition, "k0", outs)
    cache.store_outputs(definition, "k1", outs)
    cache.store_latency(definition, "k0", {"latency_ms": 0.5, "extra": {}})
    cache.prefetch_outputs(definition, ["k0"])
    for key in ("k0", "k1"):  # read ahead, then read when asked
        got = cache.load_outputs(definition, key, "cpu")
        assert torch.equal(got[0], outs[0]) and got[1] == 1.5
    assert cache.load_latency(definition, "k0") == {"latency_ms": 0.5, "extra": {}}
    assert asked == [True, True, False]


def test_the_pinned_pool_reuses_blocks_and_keeps_to_its_limit(monkeypatch):
    """Blocks are powers of two from 1 MiB, allocated once and handed out again when the
    last view of a buffer dies; past the limit a read gets a bytearray."""
    from fib_core.bench.evaluation.signed_cache import PinnedPool, host_buffer

    allocated = []

    def allocate(self, block):
        allocated.append(block)
        return torch.zeros(block, dtype=torch.uint8)  # page-locked on a GPU

    monkeypatch.setattr(PinnedPool, "_allocate", allocate)
    mib = 1 << 20
    pool = PinnedPool("cuda:0", limit=4 * mib)
    a = pool.take(3 * mib)  # a 4 MiB block: the whole limit
    assert len(a) == 3 * mib and allocated == [4 * mib]
    assert pool.take(10) is None and isinstance(host_buffer(10, pool), bytearray)
    a[:] = 7
    view = torch.frombuffer(a, dtype=torch.uint8)  # a tensor view keeps the block in use
    del a
    assert pool.take(3 * mib) is None
    del view  # the last view: the block goes back
    b = pool.take(4 * mib)
    assert b is not None and len(b) == 4 * mib and allocated == [4 * mib]
    assert pool.take(0) is None


def test_host_buffer_is_bytes_without_a_gpu_and_page_locked_with_one():
    from fib_core.bench.evaluation.signed_cache import PinnedPool, host_buffer

    assert host_buffer(16) == bytearray(16)
    buf = host_buffer(1 << 20, PinnedPool("cuda:0"))
    assert len(buf) == 1 << 20
    if torch.cuda.is_available():
        assert torch.from_numpy(buf).is_pinned()
    else:
        assert isinstance(buf, bytearray)


def test_a_signed_file_whose_entries_leave_the_file_is_refused(tmp_path):
    from fib_core.bench.evaluation.signed_cache import _header, _view

    data = bytearray(b"\x00" * 8 + b'{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}')
    data[:8] = (len(data) - 8).to_bytes(8, "little")
    data += bytes(8)  # only half the 16 bytes the entry claims
    with pytest.raises(ValueError, match="does not fit"):
        _view(data, _header(data), "t")


def test_signed_cache_rejects_a_rewritten_latency(tmp_path, toy_definition):
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    key = ensure_key(tmp_path)
    cache = SignedReferenceCache(key, tmp_path)
    record = {"latency_ms": 0.5, "extra": {"method": "events"}}
    cache.store_latency(toy_definition, "k1", record)
    assert cache.load_latency(toy_definition, "k1") == record
    path = cache._path(toy_definition, "k1", ".latency.json")
    path.write_text(json.dumps({"latency_ms": 1000.0, "extra": {}}))
    assert cache.load_latency(toy_definition, "k1") is None
    # A cache written without the key (or by another key) is not trusted either.
    assert SignedReferenceCache(b"0" * 32, tmp_path).load_latency(toy_definition, "k1") is None
    outs = [torch.arange(6, dtype=torch.float32).reshape(2, 3)]
    cache.store_outputs(toy_definition, "k2", outs)
    assert torch.equal(cache.load_outputs(toy_definition, "k2", "cpu")[0], outs[0])
    data = cache._path(toy_definition, "k2", ".safetensors")
    data.write_bytes(data.read_bytes()[:-4] + bytes(4))
    assert cache.load_outputs(toy_definition, "k2", "cpu") is None


@pytest.fixture
def toy_definition():
    from pathlib import Path

    from fib_core.data.definition import Definition

    path = Path(__file__).parents[1] / "bench" / "fixtures" / "toy_axpy.json"
    return Definition.from_dict(json.loads(path.read_text()))


def test_the_audit_names_file_and_line():
    source = (
        "import sys\nimport torch\nimport fib_core.bench.evaluation.check as c\n\n"
        "def run(x, y):\n    f = sys._getframe(1).f_back\n    torch.cuda.synchronize = None\n"
        "    open('/data/traces/t.jsonl', 'w')\n    return x\n"
    )
    text = [str(f) for f in audit_sources([("main.py", source)])]
    assert any(t.startswith("main.py:3:") and "harness" in t for t in text)
    assert any(t.startswith("main.py:6:") and "frame introspection" in t for t in text)
    assert any(t.startswith("main.py:7:") and "patches torch.cuda.synchronize" in t for t in text)
    assert any(t.startswith("main.py:8:") and "writing" in t for t in text)
    honest = "import torch\n\ndef run(x, y, out):\n    out.copy_(x + y)\n"
    assert audit_sources([("main.py", honest)]) == []


def _report(status="PASSED", **extra):
    header = {
        "type": "result",
        "status": status,
        "log": "",
        "extra": {"num_input_sets": 2, **extra},
        "performance": {
            "latency_ms": 0.001,
            "reference_latency_ms": 5.0,
            "speedup_factor": 5000.0,
            "method": "x",
        },
        "correctness": None,
    }
    return validate_result(header)


def test_only_the_judge_grants_passed():
    ledger = TaskLedger(num_input_sets=2, num_trials=2)
    forged = final_result(1, _report(), ledger, {"latency_ms": 1.0, "extra": {}})
    assert forged.status == "RUNTIME_ERROR" and "never checked" in forged.log
    ok = {
        "status": "PASSED",
        "message": "",
        "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
    }
    for k, label in [(0, "set"), (1, "set"), (5, "timed"), (7, "timed")]:
        ledger.record({"set": k, "label": label}, ok)
    result = final_result(1, _report(), ledger, {"latency_ms": 1.0, "extra": {"cached": True}})
    assert result.status == "PASSED"
    # The reference latency and the speedup are the judge's, not the worker's claims.
    assert result.performance["reference_latency_ms"] == 1.0
    assert result.performance["speedup_factor"] == pytest.approx(1000.0)
    # No reference timed (a CPU smoke run): marked as not measured, the worker's claim unused.
    unmeasured = final_result(1, _report(), ledger, None).performance
    assert unmeasured["reference_timing"] == {"skipped": True}
    assert unmeasured["reference_latency_ms"] == 0.0 and unmeasured["speedup_factor"] == 0.0
    bad = {
        "status": "INCORRECT_NUMERICAL",
        "message": "3 of 6 elements",
        "correctness": {"max_relative_error": 1.0, "max_absolute_error": 2.0},
    }
    ledger.record({"set": 9, "label": "timed"}, bad)
    assert final_result(1, _report(), ledger, None).status == "INCORRECT_NUMERICAL"
    with pytest.raises(Exception, match="status"):
        validate_result({"type": "result", "status": "WINNER"})


def test_the_judges_triton_cache_is_in_the_folder_workers_never_see(tmp_path, monkeypatch):
    """The judge runs Triton kernels (fast references) and Triton loads compiled kernels and
    launcher libraries from its cache: a cache a solution can write would let it put code into
    the judge. The judge's cache lives inside the signing key's folder, which workers' sandbox
    hides; a worker keeps the user's own cache."""
    from pathlib import Path

    from fib_core.bench.containment.mounts import worker_mounts
    from fib_core.bench.engine.judge_process import JudgeHandle
    from fib_core.bench.engine.pool import WorkerHandle
    from fib_core.bench.integrity import key_dir

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    keys = key_dir().resolve()
    assert str(keys) in worker_mounts(None).hidden
    judge_env = JudgeHandle("cpu", tmp_path).child_env()
    for name in ("TRITON_CACHE_DIR", "TRITON_HOME"):
        assert Path(judge_env[name]).resolve().is_relative_to(keys)
    assert "TRITON_CACHE_DIR" not in WorkerHandle("cpu", tmp_path).child_env()


def test_a_background_prefetch_is_waited_for_and_a_later_store_wins(tmp_path, monkeypatch):
    """The judge starts reading a workload's files while the worker makes inputs; a load
    waits for its own file, uses the prefetched bytes without reading the file again, and a
    file stored after the prefetch began is read afresh (never stale)."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a"])
    for key in ("k0", "k1"):
        cache.store_outputs(definition, key, [torch.full((3,), 1.0)])
    cache.prefetch_in_background(definition, ["k0", "k1", "missing"])
    cache.store_outputs(definition, "k1", [torch.full((3,), 2.0)])  # waits, then replaces
    for future, _ in cache._current.values():
        future.result()  # the read ahead is done before reads are counted
    reads: list[str] = []
    real_read = signed_cache._read
    monkeypatch.setattr(signed_cache, "_read",
                        lambda path, pool=None: reads.append(path.name) or real_read(path))
    assert torch.equal(cache.load_outputs(definition, "k0", "cpu")[0], torch.full((3,), 1.0))
    assert torch.equal(cache.load_outputs(definition, "k1", "cpu")[0], torch.full((3,), 2.0))
    assert reads == [cache._path(definition, "k1", ".safetensors").name]
    cache.prefetch_in_background(definition, ["k0"])
    cache.forget_prefetched()
    assert cache._current == {}


def test_a_load_waits_for_its_own_file_only(tmp_path, monkeypatch):
    """A workload's first check needs one file: it is served while another file of the same
    workload is still being read."""
    import threading
    from types import SimpleNamespace

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a"])
    for key in ("k0", "k1"):
        cache.store_outputs(definition, key, [torch.full((3,), 1.0)])
    gate, slow_started = threading.Event(), threading.Event()
    real_read = signed_cache._read

    def read(path, pool=None):
        if path.stem == "k1":
            slow_started.set()
            assert gate.wait(30)
        return real_read(path)

    monkeypatch.setattr(signed_cache, "_read", read)
    cache.prefetch_in_background(definition, ["k1", "k0"])  # k1 first, and it hangs
    assert slow_started.wait(30)
    assert torch.equal(cache.load_outputs(definition, "k0", "cpu")[0], torch.full((3,), 1.0))
    assert not gate.is_set()  # k0 was served while k1 was still being read
    gate.set()
    assert torch.equal(cache.load_outputs(definition, "k1", "cpu")[0], torch.full((3,), 1.0))


def test_a_store_waits_for_a_read_dropped_while_it_ran(tmp_path, monkeypatch):
    """A read that was running when its workload ended is not served, and a later store of
    the same file waits for it: the read never sees the new file with the old signature (a
    spurious signature warning) nor the reverse."""
    import threading
    from types import SimpleNamespace

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a"])
    cache.store_outputs(definition, "k0", [torch.full((3,), 1.0)])
    gate, started = threading.Event(), threading.Event()
    real_read = signed_cache._read

    def read(path, pool=None):
        started.set()
        assert gate.wait(30)
        return real_read(path)

    monkeypatch.setattr(signed_cache, "_read", read)
    cache.prefetch_in_background(definition, ["k0"])
    assert started.wait(30)
    cache.forget_prefetched()  # the workload ended while k0 was being read
    assert cache._current == {} and len(cache._running) == 1
    stored = threading.Event()

    def store():
        cache.store_outputs(definition, "k0", [torch.full((3,), 2.0)])
        stored.set()

    writer = threading.Thread(target=store)
    writer.start()
    assert not stored.wait(0.5)  # held back by the running read
    gate.set()
    writer.join(30)
    assert stored.is_set() and cache._running == {}
    monkeypatch.setattr(signed_cache, "_read", real_read)
    assert torch.equal(cache.load_outputs(definition, "k0", "cpu")[0], torch.full((3,), 2.0))


def test_files_read_ahead_for_another_workload_do_not_use_up_the_budget(tmp_path,
                                                                        monkeypatch):
    """When the workload that starts is not the one announced as next, what was read ahead
    for the announced one is dropped before the starting one's files are queued, so the
    budget is the starting workload's; close() stops the pool and loads still work."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a"])
    for key in ("b0", "b1", "c0", "c1"):
        cache.store_outputs(definition, key, [torch.zeros(1000)])
    size = cache._path(definition, "c0", ".safetensors").stat().st_size
    monkeypatch.setattr(signed_cache, "PREFETCH_BYTES", 2 * size)
    cache.prefetch_upcoming(definition, ["b0", "b1"])  # b announced, fills the budget
    cache.prefetch_in_background(definition, ["c0", "c1"])  # c starts instead
    assert sorted(p.stem for p in cache._current) == ["c0", "c1"] and cache._upcoming == {}
    cache.close()
    assert cache._pool is None and cache._current == {}
    assert torch.equal(cache.load_outputs(definition, "c0", "cpu")[0], torch.zeros(1000))


def test_the_next_workloads_files_are_read_ahead_and_only_served_to_it(tmp_path, monkeypatch):
    """While one workload runs the judge reads the next one's files; when that workload
    starts they are taken over without a second read. Files read ahead for a workload that
    does not come next are dropped, a store drops what was read ahead, and the end of a
    workload (forget) keeps the next one's files."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation import signed_cache
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    definition = SimpleNamespace(name="d", output_names=["a"])
    for key in ("a0", "b0", "b1", "c0"):
        cache.store_outputs(definition, key, [torch.full((3,), float(len(key)))])
    reads: list[str] = []
    real_read = signed_cache._read
    monkeypatch.setattr(signed_cache, "_read",
                        lambda path, pool=None: reads.append(path.stem) or real_read(path))
    cache.prefetch_in_background(definition, ["a0"])  # workload a starts
    cache.prefetch_upcoming(definition, ["b0", "b1", "missing"])  # b comes next
    assert torch.equal(cache.load_outputs(definition, "a0", "cpu")[0], torch.full((3,), 2.0))
    cache.forget_prefetched()  # a ends
    cache.prefetch_in_background(definition, ["b0", "b1"])  # b starts
    for future, _ in cache._current.values():
        future.result()  # reads run in the pool: wait for them before counting
    assert sorted(reads) == ["a0", "b0", "b1"]
    cache.load_outputs(definition, "b0", "cpu")
    cache.load_outputs(definition, "b1", "cpu")
    assert sorted(reads) == ["a0", "b0", "b1"]  # no second read
    cache.prefetch_upcoming(definition, ["c0"])
    cache.prefetch_in_background(definition, ["a0"])  # another workload than announced
    assert cache._upcoming == {} and "c0" not in str(list(cache._current))
    cache.prefetch_upcoming(definition, ["c0"])
    cache.prefetch_outputs(definition, ["a0"])  # the current workload's loads: c0 stays
    cache.store_outputs(definition, "a0", [torch.zeros(3)])  # another file: kept
    assert list(cache._upcoming) == [cache._path(definition, "c0", ".safetensors")]
    cache.store_outputs(definition, "c0", [torch.zeros(3)])  # the file read ahead: dropped
    assert cache._upcoming == {}
    cache.forget_prefetched()


def test_pipelined_checks_keep_few_in_flight_and_match_verdicts_in_order():
    """A worker sends its checks ahead but never has more than MAX_IN_FLIGHT unread verdicts
    (the parent's verdicts then always fit in the socket buffer), and each check gets its own
    verdict however the waits interleave; drain reads what nobody waited for."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation.judge import RemoteChecker

    sent: list[int] = []
    replies: list[dict] = []
    peak = [0]

    def send(header, blob):
        sent.append(header["set"])
        peak[0] = max(peak[0], len(sent) - len(replies))

    def receive():
        k = sent[len(replies)]
        replies.append({"status": "PASSED" if k % 2 else "INCORRECT_NUMERICAL", "message": str(k)})
        return replies[-1]

    checker = RemoteChecker(send, receive)
    definition = SimpleNamespace(
        output_names=["o"], outputs={"o": SimpleNamespace(dtype="float32")},
        output_shapes=lambda axes: {"o": (2,)},
    )
    prep = SimpleNamespace(sets=[[torch.zeros(2)]], axes={}, total_sets=40)
    waits = [checker.submit(definition, [torch.zeros(2)], k, prep, "set") for k in range(30)]
    assert peak[0] <= RemoteChecker.MAX_IN_FLIGHT
    for k in (29, 3, 17, 0):
        got = waits[k]()
        assert got.message == str(k) and got.passed == bool(k % 2)
    checker.drain()
    assert len(replies) == 30 and not checker._waiting


def test_the_parent_refuses_more_checks_than_a_run_makes():
    from fib_core.bench.evaluation.wire import WireError

    ledger = TaskLedger(num_input_sets=4, num_trials=3)
    for _ in range(4 + 2 * 3):
        ledger.admit()
    with pytest.raises(WireError, match="more checks than the run makes"):
        ledger.admit()


def test_a_tensor_subclass_output_is_refused_not_read():
    """A subclass could compute its bytes when the judge's copy reads them, after the timed
    call returned: only plain tensors are checked."""

    class Lazy(torch.Tensor):
        pass

    with pytest.raises(TypeError, match="plain torch.Tensor"):
        encode_values([torch.zeros(3).as_subclass(Lazy)])
    specs, _ = encode_values([torch.zeros(3)])
    assert specs[0]["shape"] == [3]


# --- the shared output buffer (fib_core.bench.evaluation.exchange) ---------------------------------------

exchange = pytest.importorskip("fib_core.bench.evaluation.exchange")
needs_memfd = pytest.mark.skipif(not exchange.supported(), reason="sealed memfds are Linux-only")


@needs_memfd
def test_the_shared_output_buffer_cannot_change_size(pair):
    """The parent seals the buffer before any child sees it: a worker cannot shrink it under
    the judge's mapping (which would fault the judge) nor grow it, nor lift the seals."""
    import fcntl
    import os

    from fib_core.bench.evaluation.wire import recv_message_fds, send_object

    handle = exchange.ArenaHandle.create(3 << 20, slots=2)
    try:
        assert handle.slot_bytes == 4 << 20 and os.fstat(handle.fd).st_size == 8 << 20
        a, b = pair
        send_object(a, handle.message(), fds=[handle.fd])
        message, _, fds = recv_message_fds(b)
        assert message == ("arena", handle.arena_id, 2, 4 << 20) and len(fds) == 1
        received = fds[0]  # what the worker holds: the same file, through its own descriptor
        for size in (1 << 20, 16 << 20):
            with pytest.raises(PermissionError):
                os.ftruncate(received, size)
        with pytest.raises(PermissionError):
            fcntl.fcntl(received, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        arena = exchange.Arena(received, handle.arena_id, 2, 4 << 20)
        with pytest.raises(ValueError, match="outside the shared buffer"):
            arena.region(2, 10)
        with pytest.raises(ValueError, match="outside the shared buffer"):
            arena.region(0, (4 << 20) + 1)
        arena.close()
    finally:
        handle.close()


@needs_memfd
def test_outputs_written_into_a_slot_are_read_back_by_the_judge_as_its_own_copy(pair):
    """The worker copies its outputs straight into a slot; the judge, given the same buffer,
    decodes them from there into tensors it owns: later writes by the worker change nothing
    the judge already read."""
    import os

    handle = exchange.ArenaHandle.create(1 << 10, slots=2)
    try:
        worker = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        judge = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        outs = [torch.randn(4, 3).to(torch.bfloat16), 7, torch.arange(5, dtype=torch.int32)]
        slot = worker.take()
        specs, parts = encode_values(outs, into=worker.region(slot, worker.slot_bytes))
        assert parts == [] and worker.take() == 1 and worker.take() == 0  # slots in turn
        from fib_core.bench.evaluation.wire import payload_bytes

        n = payload_bytes(validate_values(specs, None, 3, capacity=handle.slot_bytes))
        got = decode_values(specs, judge.region(slot, n), "cpu")
        assert torch.equal(got[0], outs[0]) and got[1] == 7 and torch.equal(got[2], outs[2])
        worker.region(slot, n)[:] = bytes(n)  # the worker scribbles over the slot afterwards
        assert torch.equal(got[0], outs[0]) and torch.equal(got[2], outs[2])
        with pytest.raises(ValueError, match="do not fit"):
            encode_values([torch.zeros(1024)], into=worker.region(0, 100))
        worker.close()
        judge.close()
    finally:
        handle.close()


@needs_memfd
def test_a_gpu_process_page_locks_its_mapping_and_releases_it_on_close(monkeypatch):
    """Each side page-locks the arena (up to PIN_MAX_BYTES) through the driver once its CUDA
    context exists, and unregisters it before unmapping; a refusal leaves a pageable mapping
    that still works, and no driver (no GPU) means no attempt."""
    import ctypes
    import os

    calls = []

    class Driver:
        status = 0
        context = 0

        def cuCtxGetCurrent(self, out):
            ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = self.context or None
            return 0

        def cuMemHostRegister_v2(self, ptr, size, flags):
            calls.append(("register", ptr.value, size.value, flags.value))
            return self.status

        def cuMemHostUnregister(self, ptr):
            calls.append(("unregister", ptr.value))
            return 0

    driver = Driver()
    monkeypatch.setattr(exchange, "cuda_driver", lambda: driver)
    handle = exchange.ArenaHandle.create(1 << 10, slots=2)
    try:
        arena = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        assert not arena.pin() and calls == []  # no CUDA context yet: asked again later
        driver.context = 1234
        assert arena.pin() and arena.pin()  # registered once
        assert [c[0] for c in calls] == ["register"]
        assert calls[0][2:] == (2 * handle.slot_bytes, 1)  # the whole arena, portable
        arena.region(1, 4)[:] = b"abcd"  # still an ordinary mapping
        arena.close()
        assert calls[1] == ("unregister", calls[0][1])
        driver.status = 1  # the driver refuses
        refused = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        assert not refused.pin() and not refused.pin() and len(calls) == 3  # tried once
        assert bytes(refused.region(1, 4)) == b"abcd"
        refused.close()
        assert len(calls) == 3  # the refused registration is not undone
        monkeypatch.setattr(exchange, "PIN_MAX_BYTES", handle.slot_bytes)
        large = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        assert not large.pin() and len(calls) == 3  # too large: not even asked
        large.close()
        monkeypatch.setattr(exchange, "cuda_driver", lambda: None)
        bare = exchange.Arena(os.dup(handle.fd), 1, 2, handle.slot_bytes)
        assert not bare.pin()
        bare.close()
    finally:
        handle.close()


def test_a_check_naming_a_slot_is_held_to_the_buffer_the_parent_gave():
    """The parent validates a slot request like a blob: the current buffer's id, a slot that
    exists, outputs no larger than a slot, no bytes besides; otherwise it is malformed."""
    from types import SimpleNamespace

    from fib_core.bench.evaluation.verdicts import validate_check

    arena = SimpleNamespace(arena_id=5, slots=8, slot_bytes=64)
    spec = [{"kind": "tensor", "dtype": "float32", "shape": [16], "nbytes": 64}]
    good = {"type": "check", "set": 0, "sets": 4, "label": "set", "outputs": spec,
            "arena": 5, "slot": 7}
    assert validate_check(dict(good), b"", 1, arena)["slot"] == 7
    bad = [
        ({"slot": 8}, b"", arena), ({"slot": -1}, b"", arena), ({"slot": True}, b"", arena),
        ({"arena": 4}, b"", arena), ({}, b"", None), ({}, b"x", arena),
        ({"outputs": [{**spec[0], "shape": [17], "nbytes": 68}]}, b"", arena),
    ]
    for change, blob, given in bad:
        with pytest.raises(WireError):
            validate_check({**good, **change}, blob, 1, given)


def test_a_patched_harness_function_or_module_is_noticed_after_the_task(monkeypatch):
    """The worker takes its baseline once; after each task it names whatever a solution
    rebound: a kit function, a class member, a torch function, or a whole module swapped in
    sys.modules. Names added since are no change."""
    import sys
    import types

    import fib_core.bench.evaluation.check as check
    from fib_core.bench.evaluation import tamper_watch
    from fib_core.checking import Tolerance

    baseline = tamper_watch.fingerprint()
    assert tamper_watch.tampered(baseline) == []
    monkeypatch.setattr(check, "check_outputs", lambda *a, **k: None)
    monkeypatch.setattr(Tolerance, "to_dict", lambda self: {})
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(check, "brand_new_helper", lambda: None, raising=False)
    assert tamper_watch.tampered(baseline) == [
        "fib_core.bench.evaluation.check.check_outputs",
        "fib_core.checking.Tolerance.to_dict",
        "torch.allclose",
    ]
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "fib_core.bench.evaluation.check", types.ModuleType("fake"))
    assert tamper_watch.tampered(baseline) == ["sys.modules['fib_core.bench.evaluation.check']"]
    monkeypatch.undo()
    monkeypatch.setattr(check.check_outputs, "__code__", (lambda *a, **k: None).__code__)
    named = tamper_watch.tampered(baseline)  # every module that imported it names it too
    assert "fib_core.bench.evaluation.check.check_outputs.__code__" in named
    assert all(name.endswith("check_outputs.__code__") for name in named)
    monkeypatch.undo()
    assert tamper_watch.tampered(baseline) == []


_DYNAMO_SCRIPT = """
import functools, sys, torch
import fib_core.bench.evaluation.check
from fib_core.bench.evaluation import tamper_watch

def other(seed):
    return None

base = tamper_watch.fingerprint()
assert not base.dynamo_loaded and "torch._dynamo" not in sys.modules
original = torch.manual_seed
torch.manual_seed = torch._disable_dynamo(other)  # dynamo's wrapper, but dynamo not loaded
assert not tamper_watch.dynamo_import(base, tamper_watch.tampered(base))
torch.manual_seed = original
import torch._dynamo
genuine = torch.manual_seed
assert genuine is not original and tamper_watch.tampered(base) == ["torch.manual_seed"]
import types
forged = [
    functools.wraps(original)(lambda *a, **k: None),  # claims to wrap the original
    torch._disable_dynamo(other),  # torch's own wrapper around another function
    # torch's own code and closure, run against globals of the solution's choosing
    types.FunctionType(genuine.__code__, {"__builtins__": __builtins__}, "inner", None,
                       genuine.__closure__),
]
for fake in forged:
    torch.manual_seed = fake
    assert not tamper_watch.dynamo_import(base, tamper_watch.tampered(base)), fake
torch.manual_seed = genuine
saved = torch.allclose
torch.allclose = lambda *a, **k: True  # dynamo's change plus one more: tampering
assert not tamper_watch.dynamo_import(base, tamper_watch.tampered(base))
torch.allclose = saved
assert tamper_watch.dynamo_import(base, tamper_watch.tampered(base))
assert tamper_watch.tampered(base) == [] and base.dynamo_loaded
genuine.__closure__[0].cell_contents = other  # what the wrapper calls is watched from now on
assert tamper_watch.tampered(base) == ["torch.manual_seed.<fn>"]
genuine.__closure__[0].cell_contents = original
torch.manual_seed = other  # taken in once; a later swap is tampering again
assert tamper_watch.tampered(base) == ["torch.manual_seed"]
assert not tamper_watch.dynamo_import(base, ["torch.manual_seed"])
print("ok")
"""


def test_importing_torch_dynamo_is_not_tampering_but_a_forgery_of_it_is():
    """Workers no longer import torch._dynamo at start; a solution that does (torch.compile)
    rebinds torch.manual_seed, which the baseline takes in only when it is torch's own wrapper
    around the same function, dynamo was absent before, and nothing else changed. Run in a
    fresh interpreter: dynamo's import cannot be undone."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", _DYNAMO_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@needs_memfd
def test_outputs_larger_than_a_slot_are_sent_as_bytes_not_failed():
    """A slot too small for a call's outputs (a buffer sized for an earlier workload that could
    not be replaced) is no fault of the solution: the check goes as bytes instead."""
    import os
    from types import SimpleNamespace

    from fib_core.bench.evaluation.judge import RemoteChecker

    handle = exchange.ArenaHandle.create(1, slots=2)  # 1 MiB slots
    sent: list[tuple[dict, object]] = []
    checker = RemoteChecker(lambda h, b: sent.append((h, b)), lambda: {"status": "PASSED"})
    checker.arena = exchange.Arena(os.dup(handle.fd), handle.arena_id, 2, handle.slot_bytes)
    definition = SimpleNamespace(
        output_names=["o"], outputs={"o": SimpleNamespace(dtype="float32")},
        output_shapes=lambda axes: {"o": axes["shape"]},
    )
    for shape in ((1024,), (1 << 19,)):  # 4 KiB fits a slot; 2 MiB does not
        prep = SimpleNamespace(sets=[[torch.zeros(1)]], axes={"shape": shape}, total_sets=4)
        assert checker.submit(definition, [torch.ones(shape)], 0, prep, "set")().passed
    (small, small_blob), (large, large_blob) = sent
    assert "slot" in small and not small_blob
    assert "slot" not in large and sum(memoryview(p).nbytes for p in large_blob) == 2 << 20
    checker.arena.close()
    handle.close()
