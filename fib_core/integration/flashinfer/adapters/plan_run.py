"""The plan/run pattern shared by FlashInfer's attention wrapper adapters.

A FlashInfer attention wrapper is told the batch's shapes in ``plan(...)`` and given the tensors
in ``run(...)``. The adapter patches both methods of one wrapper class: ``plan`` records what it
was told (per wrapper object, in a :class:`ContextStore`) and then calls FlashInfer's ``plan``
as before; ``run`` derives a definition name from the recorded plan, gathers the call's inputs
under the definition's names and routes them through ``apply``. On a miss (no runtime, no
definition of that name in the dataset, no solution for these sizes), or for a call the adapter
does not translate (custom masks, positional encodings, quantised caches...), FlashInfer's own
``run`` is called with the very same arguments and its result returned untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...patch_manager import PatchSpec
from ...utils import ArgBinder, ContextStore
from ..common import route_or_call, write_back_outputs

# plan() options whose non-default values change the math beyond what the definitions express
PLAN_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "custom_mask": (None,),
    "packed_custom_mask": (None,),
    "pos_encoding_mode": (None, "NONE"),
    "window_left": (None, -1),
    "logits_soft_cap": (None, 0, 0.0),
    "rope_scale": (None,),
    "rope_theta": (None,),
}
# run() options with the same role (scales of quantised caches)
RUN_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "q_scale": (None,),
    "k_scale": (None,),
    "v_scale": (None,),
}


def plain(bound: dict[str, Any], defaults: dict[str, tuple[Any, ...]]) -> bool:
    """True when every option in ``defaults`` is left at one of its neutral values."""
    for name, neutral in defaults.items():
        value = bound.get(name)
        if not any(value is v or (v is not None and value == v) for v in neutral):
            return False
    return True


def given_scale(plan: dict[str, Any], bound: dict[str, Any]) -> Any:
    """The softmax scale the caller gave: run's ``sm_scale`` if set, else plan's, else None."""
    value = bound.get("sm_scale")
    return plan.get("sm_scale") if value is None else value


class PlanRunAdapter:
    """Base of the attention adapters: subclasses name the class, the plan record and the call.

    Subclasses set ``WRAPPER_CLASS`` (a dotted path under ``flashinfer``), ``NAME``, and
    implement :meth:`record_plan` (plan's bound arguments -> the state to keep, or None when
    the plan is outside what the adapter translates), :meth:`def_name` (state -> definition
    name) and :meth:`runtime_kwargs` (state, run's bound arguments -> the definition's inputs,
    or None to call FlashInfer as is).
    """

    WRAPPER_CLASS: str = ""
    NAME: str = ""

    def __init__(self) -> None:
        self.store = ContextStore()

    def targets(self) -> list[PatchSpec]:
        """The class's ``plan`` and ``run`` at its package-root name; patching the class
        covers every module that re-exports it."""
        return [
            PatchSpec(f"{self.WRAPPER_CLASS}.{method}", "method", self.NAME, ctx_key=self.NAME)
            for method in ("plan", "run")
        ]

    # --- subclass hooks --------------------------------------------------------------------

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        raise NotImplementedError

    def def_name(self, plan: dict[str, Any]) -> str:
        raise NotImplementedError

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        raise NotImplementedError

    # --- wrappers --------------------------------------------------------------------------

    def make_wrapper(self, spec: PatchSpec, orig: Callable[..., Any]) -> Callable[..., Any]:
        method = spec.path.rsplit(".", 1)[-1]
        if method == "plan":
            return self._plan_wrapper(orig)
        if method == "run":
            return self._run_wrapper(orig)
        raise ValueError(f"PatchSpec.path: found {spec.path!r}, expected a .plan or .run method")

    def _plan_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        binder = ArgBinder(orig)

        @functools.wraps(orig)
        def plan(inst: Any, *args: Any, **kwargs: Any) -> Any:
            state = self.store.get(inst)
            state.clear()
            try:
                bound = binder.bind((inst, *args), kwargs)
                record = self.record_plan(inst, bound)
            except (TypeError, ValueError, KeyError, IndexError, AttributeError):
                record = None  # a plan call the adapter cannot read: run stays FlashInfer's
            if record is not None:
                state["plan"] = record
            return orig(inst, *args, **kwargs)

        return plan

    def _run_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        binder = ArgBinder(orig)

        @functools.wraps(orig)
        def run(inst: Any, *args: Any, **kwargs: Any) -> Any:
            plan = self.store.get(inst).get("plan")
            if plan is None:
                return orig(inst, *args, **kwargs)
            try:
                bound = binder.bind((inst, *args), kwargs)
            except TypeError:
                return orig(inst, *args, **kwargs)
            runtime_kwargs = (
                self.runtime_kwargs(inst, plan, bound) if plain(bound, RUN_DEFAULTS) else None
            )
            if runtime_kwargs is None:
                return orig(inst, *args, **kwargs)
            routed, result = route_or_call(
                self.def_name(plan), runtime_kwargs, orig, (inst, *args), kwargs
            )
            if not routed:
                return result
            if isinstance(result, (tuple, list)):
                output, lse = result[0], (result[1] if len(result) > 1 else None)
            else:
                output, lse = result, None
            return write_back_outputs(
                output=output,
                lse=lse,
                want_lse=bool(bound.get("return_lse", False)),
                out_buf=bound.get("out"),
                lse_buf=bound.get("lse"),
            )

        return run


class GQAAdapter(PlanRunAdapter):
    """A GQA attention wrapper, described by class attributes rather than code.

    ``HEAD_DIM_ARG`` names plan's q/k head-size argument, ``PLAN_TENSORS`` maps the
    definition's index inputs to plan's argument names, ``PAGED`` says plan takes a
    ``page_size`` and ``CAUSAL`` a ``causal`` flag. Definition names follow one rule:
    ``<NAME>[_causal]_h{H}_kv{K}_d{D}[_ps{P}]``.
    """

    HEAD_DIM_ARG: str = "head_dim_qk"
    PLAN_TENSORS: dict[str, str] = {}
    PAGED: bool = False
    CAUSAL: bool = False

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        # a plan option that changes the math, or a value head size other than the q/k one
        # (the definitions have one head size), is left to FlashInfer
        head_dim = int(bound[self.HEAD_DIM_ARG])
        if not plain(bound, PLAN_DEFAULTS) or bound.get("head_dim_vo") not in (None, head_dim):
            return None
        plan = {name: bound[arg] for name, arg in self.PLAN_TENSORS.items()}
        plan["num_qo_heads"] = int(bound["num_qo_heads"])
        plan["num_kv_heads"] = int(bound["num_kv_heads"])
        plan["head_dim"] = head_dim
        plan["sm_scale"] = bound.get("sm_scale")
        if self.PAGED:
            plan["page_size"] = int(bound["page_size"])
        if self.CAUSAL:
            plan["causal"] = bool(bound.get("causal", False))
        return plan

    def def_name(self, plan: dict[str, Any]) -> str:
        mask = "_causal" if plan.get("causal") else ""
        pages = f"_ps{plan['page_size']}" if "page_size" in plan else ""
        return (
            f"{self.NAME}{mask}_h{plan['num_qo_heads']}_kv{plan['num_kv_heads']}"
            f"_d{plan['head_dim']}{pages}"
        )
