"""``python -m nac_studio [FILE ...]``: same as the ``nac-studio`` command."""
import sys

from .app import main

sys.exit(main())
