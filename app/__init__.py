"""Mnemoscope entry points (GUI and CLI), settings and wiring."""

__version__ = "0.1.0"
