from .running.cli import run

run()
