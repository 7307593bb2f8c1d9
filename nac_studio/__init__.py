"""NAC Studio: the PySide6 GUI over nac_engine (arrives with the Studio issue).

The GUI observes engine objects and issues commands; all work happens in nac_engine.
"""
