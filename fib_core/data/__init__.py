"""The FlashInfer-Trace data model: definitions, workloads, solutions, traces, and TraceSet.

The models are pydantic v2 models, as in the organizers' package: ``model_validate``,
``model_dump_json``, ``model_copy`` and ``model_json_schema`` work on each. Importing this
package never imports torch; only blob and dtype helpers do, when called. The organizers' file
helpers (``load_json_file``, ``save_jsonl_file``, ``from_json``...) are in :mod:`.json_codec`.
"""

from __future__ import annotations

from .definition import AxisConst, AxisSpec, AxisVar, Definition, TensorSpec
from .dtypes import DTYPE_NAMES, dtype_name, torch_dtype
from .errors import BaselineError, DatasetError, DatasetNotFoundError, UnknownDefinitionError
from .json_codec import (
    append_jsonl_file,
    from_json,
    load_json_file,
    load_jsonl_file,
    save_json_file,
    save_jsonl_file,
    to_json,
)
from .json_io import (
    TruncatedRecordWarning,
    append_jsonl,
    dump_json,
    dump_jsonl,
    load_json,
    load_jsonl,
)
from .solution import BuildSpec, Solution, SourceFile, SupportedBindings, SupportedLanguages
from .trace import Correctness, Environment, Evaluation, EvaluationStatus, Performance, Trace
from .traceset import TraceSet, default_dataset_root
from .workload import InputSpec, RandomInput, SafetensorsInput, ScalarInput, Workload

InputDesc = InputSpec  # the organizers' name of the input-kind union

__all__ = [
    "DTYPE_NAMES",
    "AxisConst",
    "AxisSpec",
    "AxisVar",
    "BaselineError",
    "BuildSpec",
    "Correctness",
    "DatasetError",
    "DatasetNotFoundError",
    "Definition",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "InputDesc",
    "InputSpec",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "SupportedBindings",
    "SupportedLanguages",
    "TensorSpec",
    "Trace",
    "TraceSet",
    "TruncatedRecordWarning",
    "UnknownDefinitionError",
    "Workload",
    "append_jsonl",
    "append_jsonl_file",
    "default_dataset_root",
    "dtype_name",
    "dump_json",
    "dump_jsonl",
    "from_json",
    "load_json",
    "load_json_file",
    "load_jsonl",
    "load_jsonl_file",
    "save_json_file",
    "save_jsonl_file",
    "to_json",
    "torch_dtype",
]
