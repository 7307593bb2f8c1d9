"""Qt item-model roles, alignments and flags as plain values, looked up once.

A table model's ``data()`` runs once per role per cell per repaint (Qt 6's ``multiData`` asks
for about ten roles a cell), and every ``Qt.ItemDataRole.X`` or ``a | b`` on PySide6's enums
goes through Python's enum machinery. The models compare the role against these ints.
"""
from __future__ import annotations

from PySide6.QtCore import Qt

ITEM_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
ALIGN_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

DISPLAY = int(Qt.ItemDataRole.DisplayRole)
EDIT = int(Qt.ItemDataRole.EditRole)
DECORATION = int(Qt.ItemDataRole.DecorationRole)
TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
FONT = int(Qt.ItemDataRole.FontRole)
ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
BACKGROUND = int(Qt.ItemDataRole.BackgroundRole)
FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
