"""`python -m kor_cli` entry point."""

from kor_cli.cli import run

if __name__ == "__main__":
    run()
