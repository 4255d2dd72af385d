"""`python -m kor_cli` entry point."""

from kor_cli.cli import app

if __name__ == "__main__":
    app()
