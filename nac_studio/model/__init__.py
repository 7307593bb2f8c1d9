"""The Studio's Qt-free code: what the views show, computed without a widget in sight (and what
the engine host runs for them). Testable headless; never imports PySide6."""
