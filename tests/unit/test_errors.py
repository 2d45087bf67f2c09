"""Errors reworded by an enclosing step keep what they are: their type (the exit code), hint and other attributes."""

from __future__ import annotations

from ocivendir.engine.sync import _frame
from ocivendir.errors import NotFound, OcivendirError, ResponseTimeout
from ocivendir.vendir.config import Content as ContentConfig


def test_a_reworded_error_keeps_its_type_and_attributes_and_says_the_new_message() -> None:
    timeout = ResponseTimeout("GET http://r/v2/: no response headers", waited=2.0)
    timeout.top_fetch = True
    reworded = timeout.reworded("Fetching image: GET http://r/v2/", hint="check the registry")
    assert type(reworded) is ResponseTimeout
    assert (reworded.waited, reworded.top_fetch, reworded.code) == (2.0, True, "registry-unreachable")
    assert str(reworded) == "Fetching image: GET http://r/v2/ (hint: check the registry)"
    assert reworded.args == ("Fetching image: GET http://r/v2/",)
    assert str(timeout) == "GET http://r/v2/: no response headers"  # the original is untouched


def test_the_syncs_frame_of_a_registry_that_never_answers_is_its_timeout_not_a_type_error() -> None:
    """A silent registry's ResponseTimeout (whose constructor takes `waited`) used to become a TypeError here."""
    content = ContentConfig(path="0", source_type="image", source={"url": "r/x:1"})
    framed = _frame(ResponseTimeout("GET http://r/v2/x/manifests/1: timed out", waited=2.0), "vendor", content)
    assert isinstance(framed, ResponseTimeout)
    assert framed.message.startswith("Syncing directory 'vendor': Syncing directory '0' with image contents: GET ")
    assert isinstance(framed.__cause__, ResponseTimeout)
    plain = _frame(NotFound("manifest unknown", hint="tag?"), "vendor", None)
    assert (type(plain), plain.hint, isinstance(plain, OcivendirError)) == (NotFound, "tag?", True)
