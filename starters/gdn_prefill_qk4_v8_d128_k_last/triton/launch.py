"""Cheaper host launches for a call made of several Triton kernels.

The judge's span runs from the call's first kernel's start to its last kernel's end, so the
host's time to launch the second and third kernels is inside it whenever the kernel before
runs shorter than that. ``kernel[grid](...)`` re-derives the compiled variant from every
argument on each launch; launching the variant it returned directly skips that. H200 host,
Triton 3.6, 20-22 arguments: 23-40 us per ``kernel[grid](...)`` (the host's speed varied
between runs) against 11-16 us through the compiled variant and 21-23 us with the key below
(7-8 us of it); the whole call at T=3028 in 5 sequences, kit timer, median of 4: 166 -> 144 us
in one run, 124 -> 109 in another (single runs swing by tens of us with the host's load).

A cached variant is only valid for arguments Triton would have compiled the same way, so each
launch first builds ``specialization_key``: the current device; per tensor its dtype and
whether its address is a multiple of 16 bytes; per integer whether it is 1, whether it is a
multiple of 16 and whether it fits 32 or 64 bits; and every keyword (constexprs and launch
options). A call that differs in any of these goes through ``kernel[grid](...)`` once and its
variant is cached too.

Example (``grid`` and the keywords as for ``kernel[grid](...)``)::

    prep = Launcher(prep_kernel)
    prep((slots, heads), k, v, num_seqs, K=128, num_warps=4)

Only where the launch path is known (Triton 3.4-3.9, whose ``JITFunction.run`` passes the
compiled variant every parameter in signature order, constexprs included) and not under
Triton's CPU interpreter (no compiled variant there): elsewhere every launch is the usual one.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import torch
import triton

_VERSION = tuple(int(part) for part in triton.__version__.split(".")[:2])
FAST_PATH = ((3, 4) <= _VERSION < (3, 10) and os.environ.get("TRITON_INTERPRET", "0") != "1"
             and torch.version.hip is None)  # AMD's backend also specializes on buffer sizes
_TENSOR = torch.Tensor


def specialization_key(args: tuple, kwargs: dict) -> tuple:
    """The cache key of one launch (see the module docstring): a superset of what Triton
    specializes on, the current device first (Triton keeps one cache per device). One
    comprehension and no Python function of ours per argument: on the hosts measured a Python
    call costs ~0.3 us, and a launch has 20-odd arguments."""
    device = torch.cuda.current_device() if torch.cuda.is_available() else -1
    return (device, *[
        (a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, _TENSOR)
        # Triton types an int as i32, i64 (also below -2**31) or u64 (from 2**63)
        else (a == 1, a % 16 == 0, -(2**31) <= a < 2**31, a < 2**63) if type(a) is int
        else type(a) if type(a) is float or a is None  # never specialized on their value
        else (type(a), a)  # bools and anything else: by value, a superset of Triton's key
        for a in args
    ], *kwargs.items())


class Launcher:
    """Launches ``kernel`` like ``kernel[grid](*args, **kwargs)``, through its compiled variant
    once one exists for the arguments' ``specialization_key``.

    The key reads positional arguments by their class of value and keywords by value, so the
    positional ones must be exactly the runtime parameters (in order), every constexpr must go
    by keyword, and ``grid`` must be a tuple: anything else raises ``TypeError`` (at a
    variant's first launch on the fast path, at every launch elsewhere). A kernel with
    pre-run hooks always launches the usual way, and Triton's knobs and the globals a kernel
    reads are taken as fixed once it has run (``kernel[grid]`` checks them on every launch).
    """

    def __init__(self, kernel: triton.JITFunction) -> None:
        self.kernel = kernel
        self._compiled: dict[tuple, tuple[Any, list]] = {}
        # (name, is constexpr, default) per parameter, read from the Python function itself
        # (the interpreter's kernels have no Triton parameter objects)
        self._params = [(name, "constexpr" in str(p.annotation), p.default)
                        for name, p in inspect.signature(kernel.fn).parameters.items()]

    def __call__(self, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
        if not FAST_PATH or self.kernel.pre_run_hooks:
            self._check_call(grid, len(args), kwargs)
            self.kernel[grid](*args, **kwargs)
            return
        key = specialization_key(args, kwargs)
        hit = self._compiled.get(key)
        if hit is not None:
            compiled, constexprs = hit
            compiled[grid + (1,) * (3 - len(grid))](*args, *constexprs)
            return
        self._check_call(grid, len(args), kwargs)
        compiled = self.kernel[grid](*args, **kwargs)
        if compiled is not None:  # every parameter left has a keyword or a default by now
            rest = self._params[len(args):]
            self._compiled[key] = (compiled, [kwargs.get(name, default)
                                              for name, _, default in rest])

    def _check_call(self, grid: Any, num_args: int, kwargs: dict) -> None:
        """Refuse the calls whose key would not tell their compiled variants apart (on every
        path, so a call that works under the CPU interpreter works on a GPU too)."""
        name = self.kernel.__name__
        by_position = [p for p, constexpr, _ in self._params[:num_args] if constexpr]
        by_keyword = [p for p, constexpr, _ in self._params[num_args:]
                      if not constexpr and p in kwargs]
        if by_position:
            raise TypeError(f"Launcher({name}): pass constexpr {', '.join(by_position)} by keyword")
        if by_keyword:
            raise TypeError(f"Launcher({name}): pass {', '.join(by_keyword)} by position (only "
                            "constexprs go by keyword)")
        if not isinstance(grid, tuple):
            raise TypeError(f"Launcher({name}): grid must be a tuple of ints, "
                            f"got {type(grid).__name__}")
