"""Settings: the LLM provider and the scheduled lifecycle."""
