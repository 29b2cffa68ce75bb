"""One module per ``profan`` subcommand; see ``profan.cli``."""
