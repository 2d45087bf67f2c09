"""The output layer: results on stdout only, lines and warnings on stderr, vendir's MultiLineError layout."""

from __future__ import annotations

import io
import json

from ocivendir.output import Output, OutputMode, multiline_error
from ocivendir.results import LogEvent, ProgressEvent, RequestStats, SyncResult, WarningEvent


def make(**mode: object) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Output(OutputMode(**mode), stdout=out, stderr=err), out, err  # type: ignore[arg-type]


def test_multiline_error_splits_at_capitalised_frames_but_not_inside_brackets() -> None:
    text = "Syncing directory 'v': Syncing directory '.' with image contents: Fetching: x (hint: Did you: Yes)"
    assert multiline_error(text) == (
        "Syncing directory 'v':\n  Syncing directory '.' with image contents:\n    Fetching: x (hint: Did you: Yes)"
    )
    assert multiline_error("could not parse reference: r.io/a") == "could not parse reference: r.io/a"


def test_plain_mode_writes_lines_and_warnings_to_stderr_and_nothing_to_stdout() -> None:
    output, out, err = make()
    output.event(LogEvent(message="Fetching: a", indent=2))
    output.event(ProgressEvent(key="k", label="l", done=1, total=2))
    output.event(WarningEvent(message="served from cache"))
    assert out.getvalue() == ""
    assert err.getvalue() == "  Fetching: a\nocivendir: Warning: served from cache\n"


def test_quiet_json_and_vendir_modes_keep_only_warnings_on_stderr() -> None:
    for mode in ({"quiet": True}, {"json": True}, {"progress_lines": False, "prog": "vendir"}):
        output, out, err = make(**mode)
        output.event(LogEvent(message="Fetching: a"))
        output.event(WarningEvent(message="w"))
        assert out.getvalue() == ""
        assert err.getvalue().endswith(": Warning: w\n")
        assert "Fetching" not in err.getvalue()


def test_json_envelope_is_one_sorted_line() -> None:
    output, out, _ = make(json=True)
    output.block("not under json")
    output.envelope("sync", "ok", SyncResult(lock="x", fetched=1, skipped=0, requests=RequestStats(), warnings=()))
    doc = json.loads(out.getvalue())
    assert out.getvalue().count("\n") == 1
    assert list(doc) == ["command", "result", "schemaVersion", "status"]
    assert doc["result"]["requests"] == {"auth": 0, "by_endpoint": {}, "by_method": {}, "by_status": {},
                                         "bytes_received": 0, "connect_errors": 0, "served_by": {},
                                         "total": 0}  # fmt: skip


def test_errors_go_to_stderr_with_the_program_name() -> None:
    output, out, err = make(prog="vendir")
    output.error("sync", "not-found", "Syncing directory 'a': Nope", "check it", None)
    assert out.getvalue() == ""
    assert err.getvalue() == "vendir: Error: Syncing directory 'a':\n  Nope (hint: check it)\n"
