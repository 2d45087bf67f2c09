"""The go-yaml emitter against go-yaml v2 itself: byte-identical output over seeded random data, read back as meant.

tests/golden/goyaml/emit.jsonl holds what go-yaml v2 (vendir 0.40.0's vendored sigs.k8s.io/yaml/goyaml.v2, the
`yaml.Marshal` imgpkg and vendir write images.yml and lock files with) wrote for 1,241 seeded random values:
key/value pairs, ImagesLock documents with hostile annotations, and key sets for the key order (README beside it).
Ours must write the same bytes; whatever go-yaml reads back as the value, ours must too and PyYAML must read as that
value or refuse (it has no constructor for a plain `=` or `<<` value), and where go-yaml's own output does not read
back (a `<<` key is taken for a merge) the checked dump must refuse it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ocivendir.goyaml import emit
from ocivendir.goyaml.load import load_documents

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "goyaml" / "emit.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text().split("\n") if line]


def test_the_recording_covers_breaks_question_mark_keys_and_hostile_locks() -> None:
    assert len(ROWS) == 1241
    assert sum("? " in row["go"] for row in ROWS) > 300
    assert sum("\u2028" in row["go"] for row in ROWS) > 100
    assert sum(row["value"].get("kind") == "ImagesLock" for row in ROWS) > 90
    assert sum(not row["go_reads_back"] for row in ROWS) == 5


def _pyyaml(data: bytes) -> str:
    """PyYAML's reading as JSON, or "refused": it has no constructor for a plain `=` or `<<` value (YAML 1.1 tags)."""
    try:
        return json.dumps(yaml.safe_load(data), sort_keys=True)
    except yaml.constructor.ConstructorError as exc:
        assert "tag:yaml.org,2002:value" in str(exc) or "tag:yaml.org,2002:merge" in str(exc)  # noqa: PT017
        return "refused"


@pytest.mark.parametrize("chunk", range(8))
def test_ours_writes_the_bytes_go_yaml_wrote(chunk: int) -> None:
    rows = ROWS[chunk::8]
    wrong = [row["value"] for row in rows if emit.dump(row["value"]).decode() != row["go"]]
    assert wrong == []


@pytest.mark.parametrize("chunk", range(8))
def test_what_go_yaml_reads_back_reads_back_the_same_with_ours_and_pyyaml(chunk: int) -> None:
    for row in ROWS[chunk::8]:
        data = row["go"].encode()
        if row["go_reads_back"]:
            assert list(load_documents(data)) == [row["value"]]
            assert _pyyaml(data) in {"refused", json.dumps(row["value"], sort_keys=True)}
            assert emit.dump_checked(row["value"]) == data
        else:
            with pytest.raises(emit.EmitError):
                emit.dump_checked(row["value"])
