"""The --json envelope is a contract: its keys and each command's result keys are pinned here."""

from __future__ import annotations

from dataclasses import fields

import pytest

from ocivendir import reports, results

PINNED = {
    results.PullResult: {"bytes_fetched", "cache_hits", "digest", "kind", "layers", "nested", "output", "ref",
                         "relocation", "requests", "skipped_entries", "warnings"},
    results.SyncResult: {"fetched", "lock", "requests", "skipped", "warnings"},
    reports.VerifyRelocationResult: {"bundles", "requests", "warnings"},
    reports.BundleReport: {"digest", "error", "images", "method", "nested", "ref", "repository", "signature",
                           "verdict"},
    reports.ImageReport: {"digest", "image", "status"},
    reports.CacheLsResult: {"entries", "root", "totals"},
    reports.CacheEntry: {"created", "digest", "kind", "last_used", "ref", "signature", "size", "verdict"},
    reports.CacheTotals: {"bytes", "entries"},
    reports.CachePruneResult: {"bytes_freed", "dry_run", "partials", "removed", "skipped_in_use", "unreferenced"},
    reports.CacheVerifyResult: {"checked", "consistent", "repair", "repairs", "unreferenced"},
    results.RequestStats: {"auth", "by_endpoint", "by_method", "by_status", "bytes_received", "connect_errors",
                           "served_by", "total"},
    results.RelocationOutcome: {"bundle_repo", "denied", "from_cache", "method", "missing", "relocated", "rewritten"},
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PINNED), ids=lambda k: k.__name__)
def test_result_keys_are_pinned(kind: type) -> None:
    assert {f.name for f in fields(kind)} == PINNED[kind]


def test_schema_version_and_statuses() -> None:
    assert results.RESULT_SCHEMA_VERSION == 1
    statuses = {value for name, value in vars(results.ImageStatus).items() if name.isupper()}
    assert statuses == {"present", "missing", "denied", "error", "unchecked"}
