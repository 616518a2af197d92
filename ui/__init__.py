"""Mnemoscope's Qt views, item models and the asyncio/Qt task runner they use."""

from ui.pyside_fix import immortalize_bools

immortalize_bools()  # PySide6 6.12.0 drops a reference to True on every emit (see the module)
