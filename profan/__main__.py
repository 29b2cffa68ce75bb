from profan.cli import run

run()
