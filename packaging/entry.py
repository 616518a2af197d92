"""Entry point of the frozen app (PyInstaller): the same ``mnemoscope`` command as the wheel's."""

import multiprocessing
import sys

from app.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # torch/joblib may start worker processes from the bundle
    sys.exit(main())
