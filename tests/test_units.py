"""Rates and sizes print in units that scale with them."""

import pytest

from lab import LabError
from lab.results import units


@pytest.mark.parametrize("value,text", [(6.93397e14, "693 TFLOP/s"), (1.31e11, "131 GFLOP/s"),
                                        (999.96e9, "1.00 TFLOP/s"), (2.5e15, "2.50 PFLOP/s")])
def test_flops_rate(value, text):
    assert units.flops_rate(value) == text


def test_byte_rate_and_size():
    assert units.byte_rate(4.249e12) == "4.25 TB/s"
    assert units.byte_rate(19.6e9) == "19.6 GB/s"
    assert units.byte_size(60.834e9) == "60.8 GB"
    assert units.byte_size(537e6) == "537 MB"


def test_not_a_number_is_a_clear_error():
    with pytest.raises(LabError, match="finite"):
        units.flops_rate(float("nan"))


@pytest.mark.parametrize("value,text", [(4.768372e-07, "4.8 × 10⁻⁷"), (6.7e-15, "6.7 × 10⁻¹⁵"), (1e-05, "1.0 × 10⁻⁵"),
                                        (-3.6e-07, "-3.6 × 10⁻⁷"), (2.5e12, "2.5 × 10¹²"), (0.0, "0")])
def test_power_of_ten_is_written_as_a_reader_writes_it(value, text):
    from lab.units import power_of_ten

    assert power_of_ten(value) == text
    with pytest.raises(LabError, match="finite"):
        power_of_ten(float("nan"))
