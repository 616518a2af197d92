"""Mnemoscope entry points (GUI and CLI), settings and wiring."""
