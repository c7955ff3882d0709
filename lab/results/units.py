"""Rates and sizes in units that scale (693 TFLOP/s, 4.25 TB/s): see :mod:`lab.units`, where they live so
that the measuring side can print with them too. Imported from here by the book's modules."""

from lab.units import byte_rate, byte_size, flops_rate, power_of_ten, scaled  # noqa: F401  (this module's face)
