"""The contest's FlashInfer baselines, one per definition, as the kit's own solutions.

The organizers score a kernel against a solution of author "flashinfer" that calls FlashInfer
(and, for the indexer, DeepGEMM). The kit carries its own such solution for each definition,
under the organizers' names, in ``solutions/<definition>/main.py`` beside this module; they are
packed, built, checked and timed like any solution. What each needs to run is declared here,
so a run can say *before* trying why a baseline cannot run on this machine.

Example::

    from fib_core.baselines.catalog import baseline_for
    base = baseline_for("gdn_decode_qk4_v8_d128_k_last")
    base.name                                  # 'flashinfer_wrapper_9b7f1e'
    base.solution().spec.entry_point           # 'main.py::run'
    base.unavailable_reason((9, 0), "NVIDIA H100 80GB HBM3")   # None when flashinfer is installed
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from fib_core.data import Solution

AUTHOR = "flashinfer"
SOURCES_DIR = Path(__file__).resolve().parent / "solutions"
ENTRY_FILE = "main.py"
INSTALL_HINT = 'pip install -e ".[baseline]"'
MODAL_HINT = "measure it on a B200 with `modal run scripts/run_modal.py`"

SM90 = (9, 0)
SM100 = ((10, 0), (10, 3))

# import name -> (distribution whose version keys the cache, how to install it)
PACKAGES: dict[str, tuple[str, str]] = {
    "flashinfer": ("flashinfer-python", INSTALL_HINT),
    "deep_gemm": (
        "deep_gemm",
        "install DeepGEMM from its repository (pip install "
        "git+https://github.com/deepseek-ai/DeepGEMM.git; it builds with the CUDA toolkit)",
    ),
}


@dataclass(frozen=True)
class Baseline:
    """One definition's FlashInfer baseline and what it needs.

    ``capabilities``: the GPU compute capabilities its kernels run on; ``modules``: the Python
    packages it imports; ``mutates_inputs``: the kernel updates an input in place (GDN decode's
    state), as the contest's own baseline does, so the run allows it for this solution.
    """

    definition: str
    name: str
    kernels: str
    capabilities: tuple[tuple[int, int], ...]
    modules: tuple[str, ...] = ("flashinfer",)
    mutates_inputs: bool = False
    target_hardware: tuple[str, ...] = ("B200",)

    def solution(self) -> Solution:
        """The baseline as a packed solution (author "flashinfer", Python, value-returning)."""
        source = (SOURCES_DIR / self.definition / ENTRY_FILE).read_text(encoding="utf-8")
        return Solution.from_dict({
            "name": self.name,
            "definition": self.definition,
            "author": AUTHOR,
            "description": f"The kit's FlashInfer baseline: {self.kernels}",
            "spec": {
                "language": "python",
                "target_hardware": list(self.target_hardware),
                "entry_point": f"{ENTRY_FILE}::run",
                "dependencies": list(self.modules),
                "destination_passing_style": False,
            },
            "sources": [{"path": ENTRY_FILE, "content": source}],
        })

    def runs_on(self, capability: tuple[int, int]) -> bool:
        return tuple(capability) in self.capabilities

    def unavailable_reason(self, capability: tuple[int, int] | None, gpu: str | None) -> str | None:
        """Why this baseline cannot run here (one line with what to do), or None if it can."""
        if capability is None:
            return "the FlashInfer baselines need a CUDA GPU; this run has none"
        if not self.runs_on(capability):
            needs = " or ".join(f"SM{major}{minor}" for major, minor in self.capabilities)
            here = f"{gpu or 'this GPU'} is SM{capability[0]}{capability[1]}"
            return f"{self.kernels} runs on {needs} only ({here}); {MODAL_HINT}"
        for module in self.modules:
            if importlib.util.find_spec(module) is None:
                hint = PACKAGES.get(module, (module, f"pip install {module}"))[1]
                return f"{module} is not installed: {hint}"
        return None

    def versions(self) -> dict[str, str]:
        """Installed versions of the packages it calls (what its timings depend on)."""
        return {module: package_version(module) for module in self.modules}


def package_version(module: str) -> str:
    """The installed version of the package behind ``module`` ("unknown" if not found)."""
    distribution = PACKAGES.get(module, (module, ""))[0]
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


BASELINES: tuple[Baseline, ...] = (
    Baseline(
        definition="moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
        name="flashinfer_wrapper_9sdjf3",
        kernels="FlashInfer trtllm_fp8_block_scale_moe",
        capabilities=SM100,
    ),
    Baseline(
        definition="dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
        name="flashinfer_wrapper_5af199",
        kernels="FlashInfer trtllm_batch_decode_with_kv_cache_mla (sparse)",
        capabilities=SM100,
    ),
    Baseline(
        definition="dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
        name="flashinfer_deepgemm_wrapper_2ba145",
        kernels="DeepGEMM fp8_paged_mqa_logits + FlashInfer top_k_page_table_transform",
        capabilities=(SM90, *SM100),
        modules=("flashinfer", "deep_gemm"),
        target_hardware=("H100", "H200", "B200"),
    ),
    Baseline(
        definition="gdn_decode_qk4_v8_d128_k_last",
        name="flashinfer_wrapper_9b7f1e",
        kernels="FlashInfer gated_delta_rule_decode_pretranspose",
        capabilities=(SM90, *SM100),
        mutates_inputs=True,
        target_hardware=("H100", "H200", "B200"),
    ),
    Baseline(
        definition="gdn_prefill_qk4_v8_d128_k_last",
        name="flashinfer_wrapper_123ca6",
        kernels="FlashInfer chunk_gated_delta_rule",
        capabilities=(SM90, *SM100),
        target_hardware=("H100", "H200", "B200"),
    ),
)


@cache
def _by_definition() -> dict[str, Baseline]:
    return {b.definition: b for b in BASELINES}


def baseline_for(definition: str) -> Baseline | None:
    """The baseline of ``definition`` (None for a definition the contest gives none)."""
    return _by_definition().get(definition)


def capability_of(text: str | None) -> tuple[int, int] | None:
    """ "9.0" (a trace's ``compute_capability``) -> (9, 0); None for anything else.

    >>> capability_of("10.0"), capability_of(None), capability_of("x")
    ((10, 0), None, None)
    """
    if not text:
        return None
    major, _, minor = str(text).partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)
