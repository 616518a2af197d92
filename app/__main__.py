"""``python -m app`` runs the ``mnemoscope`` entry point."""

import sys

from app.main import main

sys.exit(main())
