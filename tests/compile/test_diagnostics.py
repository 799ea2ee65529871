"""Compiler output trimming: keep located error lines, drop commands and noise."""

from __future__ import annotations

from pathlib import Path

from fib_core.compile.diagnostics import compile_error, error_lines

NVCC_OUTPUT = """ninja exited with status 1
stdout:
[1/3] /usr/local/cuda/bin/nvcc -Xcompiler -fPIC -std=c++17 -O2 -Werror=foo -c /tmp/b/src/kernel.cu -o cuda_0.o
FAILED: cuda_0.o
/usr/local/cuda/bin/nvcc -Xcompiler -fPIC -c /tmp/b/src/kernel.cu -o cuda_0.o
/tmp/b/src/kernel.cu(12): warning #177-D: variable "unused" was declared but never referenced
/tmp/b/src/kernel.cu(14): error: identifier "undefined_thing" is undefined
/tmp/b/src/sub/util.cuh:3:10: fatal error: missing.h: No such file or directory
1 error detected in the compilation of "/tmp/b/src/kernel.cu".
ninja: build stopped: subcommand failed.
"""


def test_keeps_located_error_lines_with_paths_relative_to_the_solution() -> None:
    lines = error_lines(NVCC_OUTPUT, strip_prefixes=("/tmp/b/src",))
    assert lines == [
        'kernel.cu(14): error: identifier "undefined_thing" is undefined',
        "sub/util.cuh:3:10: fatal error: missing.h: No such file or directory",
    ]


def test_caps_the_count_and_says_how_many_were_left_out() -> None:
    output = "\n".join(f"k.cu({i}): error: bad thing {i}" for i in range(50))
    lines = error_lines(output, limit=20)
    assert len(lines) == 21
    assert lines[0] == "k.cu(0): error: bad thing 0"
    assert lines[-1] == "... and 30 more error lines"


def test_falls_back_to_the_tail_when_no_line_mentions_an_error() -> None:
    output = "checking versions\nThe detected CUDA version (13.0) mismatches torch's (12.8)"
    assert error_lines(output) == output.splitlines()


def test_linker_errors_count_as_errors() -> None:
    output = "/usr/bin/ld: kernel.o: in function `run':\nkernel.cpp:(.text+0x1f): undefined reference to `helper()'\ncollect2: error: ld returned 1 exit status"
    lines = error_lines(output)
    assert any("undefined reference to `helper()'" in line for line in lines)


def test_compile_error_first_line_stands_alone_and_log_is_saved(tmp_path: Path) -> None:
    log = tmp_path / "x.failed.log"
    err = compile_error("sol: cuda build failed", NVCC_OUTPUT, strip_prefixes=("/tmp/b/src",), log_path=log)
    first, *rest = str(err).splitlines()
    assert first.startswith("sol: cuda build failed") and str(log) in first
    assert rest[0].strip().startswith("kernel.cu(14): error")
    assert err.compiler_lines[0].startswith("kernel.cu(14)")
    assert log.read_text() == NVCC_OUTPUT
    assert "Traceback" not in str(err)
