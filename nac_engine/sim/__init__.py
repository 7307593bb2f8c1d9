"""Cycle-level simulator of a NAC coprocessor/ASIC (hardware config, shapes and cost models).

Importing this package does not load torch (only shape propagation does).
"""
from .config import HardwareConfig, HardwareConfigError, load_hardware, preset_names
from .shapes import InputSpec, Program, parse_input_spec

__all__ = ["load_hardware", "preset_names", "HardwareConfig", "HardwareConfigError", "Program", "InputSpec",
           "parse_input_spec"]
