"""The `rolloutbench` command line: `app.py` assembles the typer app; every other module
holds one group of commands on its own `commands` Typer and imports only what it uses."""
