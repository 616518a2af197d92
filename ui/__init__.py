"""Mnemoscope's Qt views, item models and the asyncio/Qt task runner they use."""
