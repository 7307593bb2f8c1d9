"""Cycle-level simulator of a NAC coprocessor/ASIC: systolic array, vector/SFU units, SRAM and
DMA driven by the MMAP schedule, and the reference core's RTL timing.

``simulate(program, hw="edge-32x32", inputs=..., feeds=...) -> SimResult``;
``load_hardware(preset_or_toml)`` → :class:`HardwareConfig`. Importing this package does not
load torch (only shape propagation does).
"""
from .api import prepare, simulate
from .config import HardwareConfig, HardwareConfigError, load_hardware, preset_names
from .result import InstrRecord, SimResult, Transfer
from ..runtime.shapes import InputSpec, Program, ShapeBudgetError, parse_input_spec

__all__ = ["simulate", "prepare", "load_hardware", "preset_names", "HardwareConfig", "HardwareConfigError",
           "SimResult", "InstrRecord", "Transfer", "Program", "InputSpec", "parse_input_spec", "ShapeBudgetError"]
