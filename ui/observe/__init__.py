"""Watching the engine work: timeline, stepper, review, retrieval, map, fate, budget."""
