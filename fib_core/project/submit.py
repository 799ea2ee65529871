"""``scripts/submit.py``: check, audit and tag a submission, one command.

Steps, cheapest first, each able to stop the submission with a reason:

1. the fork is a git repository whose tree is committed (a tag must hold what was checked);
2. every definition packs (entry point and signature checked) and passes the submission audit
   (:mod:`fib_core.project.submission_audit`: errors stop, warnings are shown);
3. every definition has a passing run in the organizers' settings: a ledger record of the same
   solution hash (all workloads, contest settings, a GPU), or a run made now through the same
   path as ``run_local.py --contest``. Without a GPU those settings cannot run: the submission
   is refused, unless ``allow_smoke`` accepts a CPU smoke check (correctness on the quick
   subset, no timing), which the tag message then says;
4. the plan is shown (definition, solution hash, evidence, tag, commit), with the track score
   when every definition has GPU figures;
5. unless ``dry_run``: one ``submission-<definition>-vN`` tag per definition
   (:mod:`fib_core.project.tagging`), and the push command.

Example::

    from pathlib import Path
    from fib_core.project.submit import SubmitOptions, submit
    exit_code = submit(Path("config.toml"), SubmitOptions(dry_run=True))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.bench.containment.source_audit import audit_solution
from fib_core.bench.grading import eval_settings
from fib_core.dataset.tracks import track_of_definition
from fib_core.errors import ConfigError
from fib_core.project import runflow
from fib_core.project.config import load_config
from fib_core.project.entry import display_path
from fib_core.project.runflow import RunOptions, execute_on_gpus, make_request
from fib_core.project.submission_audit import ERROR, Finding, audit_settings, audit_submission
from fib_core.project.tagging import (
    create_tag,
    next_tag,
    push_command,
    repo_root,
    submission_commit,
    uncommitted,
)
from fib_core.project.track import definition_config, read_toml

if TYPE_CHECKING:
    from fib_core.data import Solution
    from fib_core.project.submission_audit import Finding
    from fib_core.project.workspace import Workspace

CONTEST = "contest run"
LEDGER = "ledger"
SMOKE = "CPU smoke"


@dataclass
class SubmitOptions:
    """What ``submit.py`` was asked: ``definition`` None = every definition of the fork."""

    definition: str | None = None
    dry_run: bool = False
    allow_smoke: bool = False
    rerun: bool = False  # run again even when the ledger holds a passing run


@dataclass(frozen=True)
class Evidence:
    """Why a definition counts as passing (or not): where the figures come from."""

    kind: str  # CONTEST | LEDGER | SMOKE
    passed: bool
    score: float | None  # None: no GPU timing (smoke)
    detail: str


@dataclass
class DefinitionPlan:
    """One definition's checks and, once tagged, its tag and commit."""

    definition: str
    solution: Solution | None = None
    findings: list[Finding] = field(default_factory=list)
    evidence: Evidence | None = None
    refusal: str | None = None  # why no evidence could be had
    tag: str | None = None
    commit: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ready(self) -> bool:
        return (
            self.solution is not None
            and not self.errors
            and self.evidence is not None
            and self.evidence.passed
        )


Evaluate = Callable[["Workspace", "Solution", bool, Any], Evidence]


def submit(
    config_path: Path,
    options: SubmitOptions,
    console: Any = None,
    evaluate: Evaluate | None = None,
) -> int:
    """Run the submission steps; 0 when tagged (or a clean dry run), 1 when refused."""
    # Imported here: rich takes ~55 ms to load, and importing this module does not need it.
    from rich.console import Console
    from rich.markup import escape

    console = console or Console()
    evaluate = evaluate or evaluate_definition
    cfg = load_config(config_path)
    root = cfg.root
    top = repo_root(root)
    if top.resolve() != root.resolve():
        raise ConfigError(
            f"{cfg.path}: the fork's config.toml must be at the top of its git repository "
            f"({top}); the organizers read config.toml there"
        )
    dirty = uncommitted(root)
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise ConfigError(
            f"uncommitted changes in the fork ({shown}); commit or stash them first: a tag must "
            "hold exactly what was checked"
        )
    names = [options.definition] if options.definition else list(cfg.track or (None,))
    plans = [check_definition(config_path, name, options, console, evaluate) for name in names]
    show_plan(plans, console, whole=options.definition is None, root=root)
    if not all(p.ready for p in plans):
        console.print(f"[bold red]not tagged[/]: {escape(what_to_do(plans))}", highlight=False)
        return 1
    if options.dry_run:
        again = "python scripts/submit.py" + (" --allow-smoke" if options.allow_smoke else "")
        console.print(f"dry run: everything checked, nothing tagged; `{again}` tags",
                      highlight=False)
        return 0
    return make_tags(config_path, plans, console)


def check_definition(
    config_path: Path,
    definition: str | None,
    options: SubmitOptions,
    console: Any,
    evaluate: Evaluate,
) -> DefinitionPlan:
    """Pack, audit and find or make the passing run of one definition."""
    # Imported here: rich takes ~55 ms to load, and importing this module does not need it.
    from rich.markup import escape

    # Imported here: fib_core.project.workspace loads pydantic (~50 ms); this module's import does not.
    from fib_core.project.workspace import open_workspace

    ws = open_workspace(config_path, definition)
    plan = DefinitionPlan(ws.cfg.solution.definition)
    settings = audit_settings(ws.cfg.path, read_toml(ws.cfg.path))
    try:
        plan.solution = ws.pack()
    except ConfigError as err:
        plan.findings.append(Finding("entry-point", ERROR, ws.cfg.path.name, str(err)))
        return plan
    plan.findings = audit_submission(plan.solution, ws.cfg, settings)
    console.print(
        f"[bold]{plan.definition}[/]: packed, hash {plan.solution.hash()[:12]}", highlight=False
    )
    for finding in plan.findings:
        style = "red" if finding.severity == ERROR else "yellow"
        console.print(f"  [{style}]{escape(str(finding))}[/]", highlight=False)

    for suspect in audit_solution(plan.solution):  # the harness-tampering audit: shown only
        console.print(f"  [yellow]{escape(f'warning: {suspect} [tampering]')}[/]", highlight=False)
    if plan.errors:
        plan.refusal = AUDIT_REFUSAL
        return plan

    smoke = runflow.resolve_device(None) == "cpu"  # looked up per call: tests stand in a GPU
    if not options.rerun:
        plan.evidence = ledger_evidence(ws, plan.solution)
        if plan.evidence is None and smoke and options.allow_smoke:
            plan.evidence = smoke_ledger_evidence(ws, plan.solution)
    if plan.evidence is None:
        if smoke and not options.allow_smoke:
            plan.refusal = NO_GPU_REFUSAL
            return plan
        plan.evidence = evaluate(ws, plan.solution, smoke, console)
    return plan


AUDIT_REFUSAL = "audit errors: not run"
NO_GPU_REFUSAL = (
    "no GPU here: the organizers' settings cannot run, and the ledger holds no passing "
    "contest run of this solution hash"
)


def what_to_do(plans: list[DefinitionPlan]) -> str:
    """The one next step for a refused submission, for the first reason that applies."""
    failed = [p.definition for p in plans
              if p.evidence is not None and not p.evidence.passed]
    if any(p.solution is None or p.errors for p in plans):
        return "fix the errors marked above, commit, and run submit.py again"
    if failed:
        names = " ".join(f"--definition {d}" for d in failed[:1])
        return (f"{', '.join(failed)} failed: see the failures above (python "
                f"scripts/run_local.py {names} reruns it), fix, commit, run submit.py again")
    if any(p.refusal == NO_GPU_REFUSAL for p in plans):
        return (
            "no GPU here, and no passing contest run in the ledger: run "
            "`python scripts/submit.py` on a GPU machine (or run_local.py --contest there "
            "first), or pass --allow-smoke to check and tag after a CPU correctness check only"
        )
    return "see the plan above"


def ledger_evidence(ws: Workspace, solution: Solution) -> Evidence | None:
    """A passing ledger run of this exact solution in the organizers' settings, or None.

    It must be on a GPU, of the same solution hash, over every workload of the definition in
    the dataset (no filter, not the quick subset), with the contest's engine settings.
    """
    # Imported here: fib_core.report.ledger loads pydantic (~50 ms); this module's import does not.
    from fib_core.report.ledger import LEDGER_RELPATH, load_ledger
    from fib_core.report.summary import summarize

    name = ws.definition.name
    total = len(ws.trace_set.workloads.get(name, []))
    contest = eval_settings(name).contest_fields()
    for record in reversed(load_ledger(ws.cfg.root / LEDGER_RELPATH)):
        engine = record.config.get("engine") or {}
        if (
            record.definition == name
            and record.solution_hash == solution.hash()
            and record.device == "cuda"
            and not record.config.get("quick")
            and not record.config.get("filters")
            and record.total == total
            and all(engine.get(k) == v for k, v in contest.items())
        ):
            summary = summarize(record.results)
            if summary.all_passed:
                return Evidence(
                    LEDGER,
                    True,
                    summary.score,
                    f"run {record.run_id} on {record.results.gpu_name or 'GPU'}, "
                    f"{summary.passed}/{summary.total} passed",
                )
    return None


def smoke_ledger_evidence(ws: Workspace, solution: Solution) -> Evidence | None:
    """A passing CPU smoke run of this exact solution in the ledger, made with the settings
    the smoke check would use now (a plain ``run_local.py`` or ``--quick`` run on this CPU),
    or None: ``--allow-smoke`` then needs no second minute-long run."""
    # Imported here: fib_core.project.recording loads pydantic (~50 ms); this module's import does not.
    from fib_core.project.recording import run_config
    from fib_core.report.ledger import LEDGER_RELPATH, load_ledger

    # Imported here: fib_core.report.summary loads pydantic (~50 ms); this module's import does not.
    from fib_core.report.summary import summarize

    name = ws.definition.name
    wanted = run_config(make_request(ws.cfg, solution, RunOptions(quick=True), "cpu"))
    wanted.pop("cross_check", None)
    for record in reversed(load_ledger(ws.cfg.root / LEDGER_RELPATH)):
        settings = {k: v for k, v in record.config.items() if k != "cross_check"}
        if (
            record.definition == name
            and record.solution_hash == solution.hash()
            and record.device == "cpu"
            and settings == wanted
        ):
            summary = summarize(record.results)
            if summary.all_passed and summary.total:
                return Evidence(
                    SMOKE,
                    True,
                    None,
                    f"run {record.run_id} from the ledger, {summary.passed}/{summary.total} "
                    "quick workloads correct, no timing",
                )
    return None


def evaluate_definition(ws: Workspace, solution: Solution, smoke: bool, console: Any) -> Evidence:
    """Run the definition now: the organizers' settings on a GPU (``run_local.py --contest``'s
    path, spread over every visible GPU, recorded in the ledger), or the CPU smoke check when
    ``smoke``."""
    # Imported here: fib_core.project.recording loads pydantic (~50 ms); this module's import does not.
    from fib_core.project.recording import RunRecording
    from fib_core.project.run_finish import finish

    # Imported here: fib_core.report.render loads pydantic (~50 ms); this module's import does not.
    from fib_core.report.render import progress_bar
    from fib_core.report.summary import summarize

    opts = RunOptions(contest=not smoke, quick=smoke)
    opts.source_dir = display_path(ws.cfg.source_dir)
    request = make_request(ws.cfg, solution, opts)
    request.dataset_path = str(ws.dataset_path)
    opts.recording = RunRecording.for_run(ws.cfg.root, solution, request)
    with progress_bar(console=console) as on_event:
        shards = execute_on_gpus(request, None, on_event=on_event)  # every visible GPU
    code = finish(shards, ws.definition, opts, console)
    summary = summarize(opts.results)
    gpu = opts.results.gpu_name or "GPU"
    if smoke:
        detail = f"{summary.passed}/{summary.total} quick workloads correct, no timing"
        return Evidence(SMOKE, code == 0, None, detail)
    detail = f"{summary.passed}/{summary.total} passed on {gpu}"
    return Evidence(CONTEST, code == 0, summary.score, detail)


def show_plan(
    plans: list[DefinitionPlan], console: Any, *, whole: bool = True, root: Path | None = None
) -> None:
    """What will be tagged, definition by definition, and (``whole``: every definition of the
    fork was checked) the track score when every one has GPU figures."""
    console.print("\n[bold]submission plan[/]")
    for p in plans:
        warn = len(p.findings) - len(p.errors)
        audit = f"{len(p.errors)} errors, {warn} warnings" if p.findings else "clean"
        if p.evidence is not None:
            mark = "passed" if p.evidence.passed else "FAILED"
            evidence = f"{mark} ({p.evidence.kind}: {p.evidence.detail})"
            if p.evidence.score is not None:
                evidence += f", score {p.evidence.score:.3f}x"
        else:
            evidence = f"none: {p.refusal or 'not run'}"
        sol = f"{p.solution.name}, hash {p.solution.hash()[:12]}" if p.solution else "does not pack"
        rows = [("solution", sol), ("audit", audit), ("evidence", evidence)]
        if root is not None and p.ready:
            rows.append(("tag", f"{next_tag(root, p.definition)} (config.toml names this one)"))
        console.print(f"  {p.definition}", highlight=False)
        for label, text in rows:
            console.print(f"    {label:<9} {text}", highlight=False, soft_wrap=True)
    if whole and plans and all(p.evidence and p.evidence.score is not None for p in plans):
        # Imported here: fib_core.project.track_score loads pydantic (~50 ms); this module's import does not.
        from fib_core.project.track_score import track_score

        track = track_of_definition(plans[0].definition)
        if track is not None:
            scores = {p.definition: p.evidence.score for p in plans if p.evidence}
            for line in track_score(track, scores).lines():
                console.print(line, highlight=False)
    elif any(p.evidence and p.evidence.kind == SMOKE for p in plans):
        console.print("no track score: a CPU smoke check measures correctness only")


def make_tags(config_path: Path, plans: list[DefinitionPlan], console: Any) -> int:
    """Write each definition's commit and tag; print what was made and the push command."""
    root = Path(config_path).resolve().parent
    for p in plans:
        cfg = definition_config(config_path, p.definition)
        ev = p.evidence
        assert ev is not None and p.solution is not None  # ready() checked it
        note = (
            "CPU smoke check only: NOT run in the organizers' settings"
            if ev.kind == SMOKE
            else f"{ev.kind}: {ev.detail}"
        )
        message = (
            f"Submission of {p.definition}\n\nsolution {p.solution.name} "
            f"hash {p.solution.hash()}\n{note}\n"
            f"audit: {len(p.findings)} warnings\n"
        )
        p.tag = next_tag(root, p.definition)
        p.commit = submission_commit(root, cfg, message)
        create_tag(root, p.tag, p.commit, message)
        console.print(f"tagged {p.tag} -> {p.commit[:12]}", highlight=False)
    if any(p.evidence and p.evidence.kind == SMOKE for p in plans):
        console.print(
            "[yellow]these tags were checked by a CPU smoke run only: run submit.py on a GPU "
            "machine before pushing[/]"
        )
    console.print("push them with:")
    console.print(f"  {push_command(root, [p.tag for p in plans if p.tag])}", soft_wrap=True)
    return 0
