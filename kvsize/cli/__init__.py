"""The `kvsize` command line: `app.py` registers the commands, `options.py` holds what they share."""

from kvsize.cli.app import app, main

__all__ = ["app", "main"]
