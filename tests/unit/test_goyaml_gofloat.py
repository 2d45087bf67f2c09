"""Go's FormatFloat(f, 'g', -1, 32) — what sigs.k8s.io/yaml makes of a float in a string field or a map key.

The expected texts were printed by Go 1.22's strconv for the same float64 values.
"""

from __future__ import annotations

import pytest

from ocivendir.goyaml.gofloat import format_float32, parses_finite
from ocivendir.goyaml.scalars import go_string, resolve_plain

GO_FORMATTED = [
    (1e3, "1000"), (123456789.5, "1.2345679e+08"), (123456789.123, "1.2345679e+08"), (1234567.0, "1.234567e+06"),
    (999999.0, "999999"), (1e20, "1e+20"), (0.0001, "0.0001"), (0.00001, "1e-05"), (1e39, "+Inf"), (-1e39, "-Inf"),
    (float("nan"), "NaN"), (-0.0, "-0"), (0.0, "0"), (3.4028235e38, "3.4028235e+38"), (3.4028236e38, "+Inf"),
    (1.17549435e-38, "1.1754944e-38"), (1e-45, "1e-45"), (1e-46, "0"), (16777217.0, "1.6777216e+07"), (0.1, "0.1"),
    (1.5, "1.5"), (-2.25, "-2.25"), (100000.0, "100000"), (1e6, "1e+06"), (123456.7, "123456.7"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), GO_FORMATTED, ids=[text for _, text in GO_FORMATTED])
def test_a_float_is_written_as_go_writes_a_float32(value: float, expected: str) -> None:
    assert format_float32(value) == expected


def test_a_float_decoded_into_a_string_field_takes_the_float32_form() -> None:
    assert go_string(resolve_plain("1234567.0")) == "1.234567e+06"
    assert go_string(resolve_plain("99999999999999999999")) == "1e+20"  # past uint64: a float
    assert go_string(resolve_plain(".inf")) == "+Inf"
    assert go_string(resolve_plain("-.inf")) == "-Inf"


@pytest.mark.parametrize("text", ["1e400", "-1e400", "1_0e400", ".1e400", "+1e309"])
def test_a_float_past_float64_stays_text_as_parsefloats_range_error_leaves_it(text: str) -> None:
    assert resolve_plain(text) == text


@pytest.mark.parametrize(("text", "value"), [("1e-400", 0.0), ("1_000.5", 1000.5), (".5e1", 5.0)])
def test_floats_go_yaml_reads(text: str, value: float) -> None:
    assert resolve_plain(text) == value


@pytest.mark.parametrize(("text", "value"), [(".5_0", 0.5), (".5e1_0", 5e9), ("._5", "._5"), (".5_", ".5_"),
                                           (".5__0", ".5__0"), (".5_e1", ".5_e1")])  # fmt: skip
def test_after_a_dot_parsefloat_takes_underscores_only_between_digits(text: str, value: object) -> None:
    # go-yaml hands a scalar starting with `.` to ParseFloat as it is (vendir 0.40.0: `.5_0` is the directory 0.5)
    assert resolve_plain(text) == value


def test_parsefloat_range() -> None:
    assert parses_finite("1e308") == 1e308
    assert parses_finite("1e309") is None
