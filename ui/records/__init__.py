"""The Records view and everything that names, picks and edits a stored record."""
