"""``llmfs grade``: grade a class's submissions of one chapter into a resumable gradebook.

Three modes::

    llmfs grade SUBMISSIONS... --chapter N [--checks DIR] [--jobs K] [--out DIR] [--seed S]
    llmfs grade --explain [--out DIR] [--scores CSV]      # review sheets; read scores back
    llmfs grade --merge GRADEBOOK... [--out DIR]          # merge gradebooks of many runs

A submission is one student notebook: a ``.ipynb`` file (the student id is its name without
the suffix, or ``--student`` for a single file) or a folder per student (the id is the folder's
name; the top-most notebook inside is graded). A SUBMISSIONS folder holds one file or folder per
student; links, special files, near-miss names, extra notebooks, id clashes and notebooks of
another chapter are refused or noted as :mod:`~llmfs.course.grading.collect` says.

Every student's code (the notebook run and the implement functions) runs in the bubblewrap
sandbox (:mod:`~llmfs.course.grading.isolation`): the command refuses to start when no sandbox
can, unless ``--no-sandbox`` is given, and then every row of the run says so.

Everything is written under ``--out`` (default ``./grading``): ``gradebook.sqlite``,
``gradebook.csv``, ``feedback/<name>-<hash>.md`` (listed in ``feedback/index.csv``) and, with
``--explain``, ``review/``. ``--merge`` takes the newest submission and review whatever the
order of its arguments and refuses gradebooks of different seeds (``--allow-mixed-seeds``).

A re-run skips every submission already graded from the same bytes with the same seed and
checks, so an interrupted run is finished by running the same command again; ``--regrade``
grades all again.

Before anything runs, the command prints the limits in force in this sandbox and how each is
enforced (:meth:`~llmfs.course.grading.isolation.Isolation.enforcement`), warns once for a limit
this machine cannot enforce, and stores the list in the gradebook (``limits:<chapter>``). Every
notebook is first read by a limited reader process (:mod:`~llmfs.course.grading.reader`): one
that cannot be read within its time and memory gets rows saying so. Everything a submission
supplied is shown on the terminal through :func:`~llmfs.course.grading.shown.terminal` (no
control, bidi or undecodable character reaches it). Ctrl-C ends the run within seconds in
every state: the sandboxes, workers and readers are killed and nothing new starts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from pathlib import Path
from typing import IO

from llmfs.course import CourseError
from llmfs.course.grading import extract, reader, reports
from llmfs.course.grading.collect import Submission, collect_submissions
from llmfs.course.grading.gradebook import Gradebook, merge_gradebooks
from llmfs.course.grading.isolation import Isolation, find_bwrap
from llmfs.course.grading.key import ChapterKey, find_chapter, load_chapter_key
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import RunOutcome, allow_starts, kill_all, run_folder, stop_all
from llmfs.course.grading.score import (
    SubmissionResult,
    checks_fingerprint,
    grade_submission,
    unreadable_results,
)
from llmfs.course.grading.shown import terminal
from llmfs.course.manifest import Manifest, load_manifest

GRADEBOOK_FILE = "gradebook.sqlite"
CSV_FILE = "gradebook.csv"


def read_submission(path: Path) -> tuple[bytes, str]:
    """The bytes of a submission file and ``""``, or ``b""`` and why it is not read (see
    :func:`~llmfs.course.grading.extract.read_notebook_bytes`: an OS error, or larger than a
    notebook may be). Every submission of a run is held in memory until graded: the size bound
    keeps one file from taking the grader's memory."""
    try:
        return extract.read_notebook_bytes(path), ""
    except CourseError as error:
        return b"", str(error)


class Progress:
    """A progress bar on a terminal, one line per submission elsewhere (logs, CI)."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.start = time.monotonic()
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def step(self, label: str) -> None:
        """One more submission finished."""
        self.done += 1
        seconds = time.monotonic() - self.start
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            bar = "#" * filled + "." * (width - filled)
            end = "\n" if self.done == self.total else ""
            shown = terminal(label, 30)
            self.stream.write(
                f"\r[{bar}] {self.done}/{self.total} {seconds:5.0f} s {shown:<30}{end}"
            )
        else:
            self.stream.write(f"graded {self.done}/{self.total}: {terminal(label)}\n")
        self.stream.flush()


def _summary(result: SubmissionResult) -> str:
    scored = sum(r.score for r in result.results if r.score is not None)
    possible = sum(r.points for r in result.results)
    pending = sum(1 for r in result.results if r.status == "pending")
    text = f"{result.student}: {scored:g} of {possible:g} points"
    if pending:
        text += f" ({pending} awaiting review)"
    # The id and the run's message are the submission's: one line, nothing a terminal obeys.
    return terminal(text + f"; run: {result.run.describe()}", 400)


def limits_in_force(limits: Limits, isolation: Isolation | None) -> tuple[tuple[str, str], ...]:
    """Each limit of a run and how it is enforced (see
    :meth:`~llmfs.course.grading.isolation.Isolation.enforcement`); without a sandbox only the
    per-process rlimits hold."""
    if isolation is not None:
        return isolation.enforcement(limits)
    return (
        ("memory", f"{limits.memory_mb} MiB of address space per process (hard RLIMIT_AS)"),
        ("cpu", f"{limits.total_timeout + 5:g} s of CPU per process (hard RLIMIT_CPU)"),
        ("file size", f"{limits.file_mb} MiB per file (hard RLIMIT_FSIZE)"),
        ("disk", "NOT ENFORCED: --no-sandbox writes to the grader's disk"),
        ("processes", "NOT ENFORCED: --no-sandbox has no process cap"),
        ("capabilities", "NOT ENFORCED: --no-sandbox runs with the grader's rights"),
    )


def report_limits(
    rows: tuple[tuple[str, str], ...], stream: IO[str], book: Gradebook | None, chapter: str
) -> None:
    """Prints the limits in force, one warning line for those not enforced, and stores them
    in the gradebook's meta table under ``limits:<chapter>``."""
    stream.write("limits in force: " + "; ".join(f"{name}: {how}" for name, how in rows) + "\n")
    missing = [name for name, how in rows if how.startswith("NOT ENFORCED")]
    if missing:
        stream.write(
            f"llmfs grade: WARNING: this machine cannot enforce {', '.join(missing)} (see "
            "the instructor guide, 'Limits')\n"
        )
    if book is not None:
        book.set_meta(f"limits:{chapter}", json.dumps(dict(rows)))


def grade_all(
    submissions: Sequence[Submission],
    key: ChapterKey,
    book: Gradebook,
    seed: int,
    limits: Limits,
    *,
    jobs: int = 1,
    regrade: bool = False,
    execute: bool = True,
    cases: int | None = None,
    progress: IO[str] | None = None,
    out: IO[str] | None = None,
    isolation: Isolation | None = None,
    manifest_path: Path | None = None,
) -> tuple[int, int]:
    """Grades every submission not already in the gradebook; returns (graded, skipped).

    The students' code runs in ``isolation`` (None: unsandboxed, said in every row). Every
    notebook is first read by a limited reader (:mod:`~llmfs.course.grading.reader`, with the
    course manifest at ``manifest_path``, by default the installed course's); one it cannot
    read within its budget gets rows saying so. Each finished submission is committed at once,
    from this thread. On KeyboardInterrupt the running sandboxes, workers and readers are killed
    and the interrupt propagates within seconds; what was committed stays.
    """
    chapter = key.chapter.id
    sandboxed = isolation is not None
    checks = checks_fingerprint(key, limits, execute=execute, cases=cases, sandboxed=sandboxed)
    todo: list[tuple[Submission, bytes]] = []
    skipped = 0
    for item in submissions:
        data, problem = (b"", "") if item.problem else read_submission(item.path)
        if problem:
            item = Submission(item.student, item.path, problem)
        if not item.problem and not regrade:
            digest = hashlib.sha256(data).hexdigest()
            if book.is_graded(item.student, chapter, digest, seed, checks):
                skipped += 1
                continue
        todo.append((item, data))
    bar = Progress(len(todo), progress or sys.stderr)
    if manifest_path is None:
        from llmfs.course.manifest import load_manifest as _load

        manifest_path = _load().path
    setup = {
        "key": f"{manifest_path}:{key.checks_id}",
        "manifest": str(manifest_path),
        "exercises": [
            {
                "id": item.exercise.id,
                "blank_source": item.blank_source,
                "function": item.function,
            }
            for item in key.exercises
        ],
    }

    def work(item: Submission, data: bytes) -> SubmissionResult:
        if item.problem:
            return SubmissionResult(
                item.student,
                key.chapter.id,
                str(item.path),
                hashlib.sha256(b"").hexdigest(),
                seed,
                checks,
                RunOutcome("not run", None, "no notebook to run"),
                unreadable_results(key, item.problem),
            )
        over = reader.reader_for(setup).vet(data, str(item.path))
        if over:
            return SubmissionResult(
                item.student,
                key.chapter.id,
                str(item.path),
                hashlib.sha256(data).hexdigest(),
                seed,
                checks,
                RunOutcome("not run", None, "the notebook was not read within the budget"),
                unreadable_results(key, over),
            )
        try:
            return grade_submission(
                item.student,
                str(item.path),
                data,
                key,
                seed,
                limits,
                execute=execute,
                cases=cases,
                isolation=isolation,
            )
        except Exception as error:
            # Whatever one submission provokes (a stack or memory exhausted by its contents, a
            # case the grader did not foresee), the rest of the class is graded: this student's
            # rows say what happened, and the run goes on.
            why = (
                f"{item.path}: the grader could not grade this submission "
                f"({type(error).__name__}: {str(error)[:200]})"
            )
            return SubmissionResult(
                item.student,
                key.chapter.id,
                str(item.path),
                hashlib.sha256(data).hexdigest(),
                seed,
                checks,
                RunOutcome("not run", None, "the submission could not be graded"),
                unreadable_results(key, why),
            )

    allow_starts()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="llmfs-grade")
    futures: list[Future[SubmissionResult]] = []
    try:
        futures = [pool.submit(work, item, data) for item, data in todo]
        pending = set(futures)
        while pending:
            done, pending = wait_for(pending, timeout=0.5, return_when="FIRST_COMPLETED")
            for future in sorted(done, key=futures.index):
                result = future.result()
                book.record(result)
                bar.step(result.student)
                if out is not None:
                    out.write(_summary(result) + "\n")
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_all()  # a submission being graded may not start another process
        # Every wait of a grading thread is sliced and watches the stop: they end at once. A
        # thread still reading a vetted notebook (its reader took at most its budget) is not
        # waited for beyond a few seconds.
        give_up = time.monotonic() + 3.0
        while not all(f.done() for f in futures) and time.monotonic() < give_up:
            kill_all()
            time.sleep(0.1)
        raise
    finally:
        done_all = all(f.done() for f in futures)
        pool.shutdown(wait=done_all)
        reader.close_all()
    return len(todo), skipped


def export(book: Gradebook, manifest: Manifest, out: Path, feedback: str) -> None:
    """Rewrites ``gradebook.csv`` and the feedback files from the gradebook."""
    reports.write_gradebook_csv(book, manifest, out / CSV_FILE)
    reports.write_feedback(book, manifest, out / "feedback", feedback)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``llmfs grade``."""
    parser.add_argument("submissions", nargs="*", type=Path, metavar="SUBMISSIONS")
    parser.add_argument("--chapter", help="the chapter graded: 2, 02 or ch02")
    parser.add_argument(
        "--checks", type=Path, help="course folder with course/, solutions/, notebooks/"
    )
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel")
    parser.add_argument("--out", type=Path, default=Path("grading"), help="output folder")
    parser.add_argument("--seed", type=int, help="hidden-case seed (default: chosen and stored)")
    parser.add_argument("--student", help="student id for a single submission file")
    parser.add_argument("--regrade", action="store_true", help="grade already graded ones again")
    parser.add_argument("--cell-timeout", type=float, default=30.0, help="seconds per cell")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook")
    parser.add_argument("--memory-mb", type=int, default=2048, help="memory per sandbox (MiB)")
    parser.add_argument("--cases", type=int, help="hidden cases per implement exercise")
    parser.add_argument("--no-execute", action="store_true", help="do not run the notebooks")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the students' code WITHOUT the bubblewrap sandbox (with your rights; every "
        "row says so)",
    )
    parser.add_argument("--feedback", choices=("md", "html"), default="md")
    parser.add_argument(
        "--explain", action="store_true", help="write explain review sheets, read scores back"
    )
    parser.add_argument("--scores", type=Path, help="explain scores CSV to read (with --explain)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="GRADEBOOK", help="merge these")
    parser.add_argument(
        "--allow-mixed-seeds",
        action="store_true",
        help="with --merge: merge gradebooks graded with different seeds",
    )


def _manifest(checks: Path | None) -> tuple[Manifest, Path | None]:
    if checks is None:
        return load_manifest(), None
    root = checks.resolve()
    return load_manifest(root / "course" / "manifest.toml"), root


def _explain(args: argparse.Namespace, manifest: Manifest, root: Path | None) -> int:
    path = args.out / GRADEBOOK_FILE
    if not path.is_file():
        raise CourseError(f"{path}: no gradebook yet (grade submissions first)")
    review = args.out / "review"
    with Gradebook(path) as book:
        scores = args.scores or review / reports.SCORES_FILE
        if args.scores is not None or scores.is_file():
            read = reports.read_review_scores(book, scores)
            print(f"read {read.stored + read.kept} score(s) from {scores}")
            for message in read.stale:
                print(message, file=sys.stderr)
        chapters = sorted({s.chapter for s in book.submissions()})
        keys = {c: load_chapter_key(manifest, manifest.chapter(c), root) for c in chapters}
        sheets = reports.write_review_sheets(book, keys, review)
        export(book, manifest, args.out, args.feedback)
        pending = sum(1 for row in book.rows() if row.status == "pending")
    print(f"wrote {len(sheets)} review sheet(s) and {review / reports.SCORES_FILE}")
    print(f"{pending} answer(s) still pending review")
    return 0


def _isolation(args: argparse.Namespace, manifest: Manifest, root: Path | None) -> Isolation | None:
    """The sandbox for this run, hiding the gradebook, the submissions and the solutions; None
    with ``--no-sandbox`` (after a warning). Raises :class:`CourseError` when no sandbox can
    start and ``--no-sandbox`` was not given."""
    # The run folder first: creating it removes what a killed earlier run left behind.
    scratch = run_folder()
    if args.no_sandbox:
        print(
            "llmfs grade: WARNING: --no-sandbox: the students' code runs with your rights "
            "(files, network, secrets in the environment); every row says so",
            file=sys.stderr,
        )
        return None
    course = root if root is not None else manifest.root
    hidden = [args.out, *args.submissions, course / "solutions"]
    if args.checks is not None:
        hidden.append(args.checks)
    return find_bwrap(scratch.path).with_course(course).with_hidden(hidden)


def main(args: argparse.Namespace) -> int:
    """Runs the command; 0 on success, 2 with a message on a usage or course error, 130 on
    Ctrl-C (everything graded so far is kept)."""
    try:
        manifest, root = _manifest(args.checks)
        if args.merge:
            target = args.out / GRADEBOOK_FILE
            merged = merge_gradebooks(target, args.merge, allow_mixed_seeds=args.allow_mixed_seeds)
            for message in merged:
                print(message, file=sys.stderr)
            with Gradebook(target) as book:
                export(book, manifest, args.out, args.feedback)
                count = len(book.submissions())
            print(f"merged {len(args.merge)} gradebook(s) into {target}: {count} submission(s)")
            return 0
        if args.explain:
            return _explain(args, manifest, root)
        if not args.submissions or not args.chapter:
            raise CourseError("give SUBMISSIONS and --chapter N (or --explain, or --merge)")
        if args.jobs < 1:
            raise CourseError(f"--jobs must be at least 1, got {args.jobs}")
        try:
            limits = Limits(
                cell_timeout=args.cell_timeout,
                total_timeout=args.timeout,
                memory_mb=args.memory_mb,
            )
        except ValueError as error:
            raise CourseError(str(error)) from None
        if args.cases is not None and args.cases < 1:
            raise CourseError(f"--cases must be at least 1, got {args.cases}")
        chapter = find_chapter(manifest, args.chapter)
        key = load_chapter_key(manifest, chapter, root)
        submissions = collect_submissions(args.submissions, chapter, args.student)
        isolation = _isolation(args, manifest, root)
        for item in submissions:
            for note in item.notes:
                print(terminal(f"{item.student}: {note}", 400), file=sys.stderr)
        with Gradebook(args.out / GRADEBOOK_FILE) as book:
            report_limits(limits_in_force(limits, isolation), sys.stderr, book, chapter.id)
            book.record_notes(chapter.id, {s.student: s.notes for s in submissions})
            seed = book.seed(args.seed, secrets.randbelow(2**31))
            try:
                graded, skipped = grade_all(
                    submissions,
                    key,
                    book,
                    seed,
                    limits,
                    jobs=args.jobs,
                    regrade=args.regrade,
                    execute=not args.no_execute,
                    cases=args.cases,
                    out=sys.stdout,
                    isolation=isolation,
                    manifest_path=manifest.path,
                )
            except KeyboardInterrupt:
                print(
                    "\ninterrupted: every submission graded so far is saved; run the same "
                    "command again to grade the rest",
                    file=sys.stderr,
                )
                return 130
            export(book, manifest, args.out, args.feedback)
        print(
            f"graded {graded}, skipped {skipped} already graded; "
            f"{args.out / CSV_FILE}, {args.out / 'feedback'}"
        )
    except CourseError as error:
        print(f"llmfs grade: {error}", file=sys.stderr)
        return 2
    return 0
