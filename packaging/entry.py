"""Entry point of the frozen app (PyInstaller): the same ``mnemoscope`` command as the wheel's.

The app starts some helpers as ``sys.executable -m <module> ...`` (e.g. bulk imports run
``-m app.import_process`` in a child process). In the frozen app ``sys.executable`` is this
program, not a Python interpreter, so ``-m <module>`` is handled here: the module (one of ours,
bundled in the archive) runs as ``__main__`` with the remaining arguments.
"""

import multiprocessing
import runpy
import sys

RUNNABLE_PREFIXES = ("app.", "ui.", "engine.")


def _run_module(argv: list[str]) -> int:
    module = argv[0]
    if not module.startswith(RUNNABLE_PREFIXES):
        print(f"mnemoscope: -m {module}: only the app's own modules can run this way",
              file=sys.stderr)
        return 2
    sys.argv = [module, *argv[1:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


if __name__ == "__main__":
    multiprocessing.freeze_support()  # torch/joblib may start worker processes from the bundle
    if len(sys.argv) > 2 and sys.argv[1] == "-m":
        sys.exit(_run_module(sys.argv[2:]))
    from app.main import main

    sys.exit(main())
