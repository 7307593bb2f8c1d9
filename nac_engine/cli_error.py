"""The ``nac`` command's one user-facing error, in its own module: ``python -m nac_engine.cli``
runs cli.py as ``__main__``, and a class defined there would differ from the one the
subcommand modules (sim, compile) import, turning their one-line errors into "internal error"."""


class CliError(Exception):
    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code
