"""CLI command groups, one module each (discovered by :func:`app.cli.build_parser`)."""
