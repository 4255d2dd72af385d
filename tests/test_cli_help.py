"""`kor-cli --help` explains itself and never imports torch."""

import subprocess
import sys

from typer.testing import CliRunner

from kor_cli.cli import app

runner = CliRunner()


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kor_cli.cli import app\n"
        "for args in (['--help'], ['extract', '--help'], ['schema', 'show', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_help_lists_commands_and_exit_codes() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for word in ("extract", "prompt", "schema", "Exit codes"):
        assert word in result.output
    extract_help = runner.invoke(app, ["extract", "--help"]).output
    assert "--max-tokens" in extract_help and "4 model failed to load" in extract_help


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == "0.1.0"


def test_every_command_lists_exit_codes_and_model_commands_name_the_default() -> None:
    for args in (["prompt"], ["schema", "show"], ["extract"], ["batch"], ["compare"]):
        text = " ".join(runner.invoke(app, [*args, "--help"]).output.split())
        assert "Exit codes: 0" in text and "2 usage, schema or input error" in text, args
    for args in (["extract"], ["generate"], ["batch"], ["compare"], ["trace"]):
        text = " ".join(runner.invoke(app, [*args, "--help"]).output.split())
        assert "Default: $KOR_CLI_MODEL, else the embedded demo model" in text, args


def test_shared_run_options_reach_each_model_command(monkeypatch) -> None:
    """The options declared once in `cli_options.run_options` are offered by every command
    that runs a model (extraction ones only where there is a schema) and arrive as given."""
    from kor_cli import cli_options

    extraction = ("--template", "--input-formatter", "--allow-refusal", "--lenient")
    shared = ("--max-tokens", "--top-p", "--seed", "--device", "--threads", "--compile")
    for args in (["extract"], ["batch"], ["compare"], ["trace"], ["generate"]):
        text = runner.invoke(app, [*args, "--help"]).output
        assert all(flag in text for flag in shared), args
        assert all((flag in text) == (args != ["generate"]) for flag in extraction), args

    seen: list[tuple[dict, object]] = []

    def fake_load_backend(model, **placement):  # stop before a model loads
        seen.append((placement, model))
        raise SystemExit(9)

    monkeypatch.setattr("kor_cli.backends.load_backend", fake_load_backend)
    monkeypatch.setattr(cli_options, "stdin_or", lambda path, limit=None: "some text")
    result = runner.invoke(
        app,
        ["extract", "schemas/person.yaml", "x.txt", "--threads", "3", "--device", "cpu",
         "--max-tokens", "7", "--no-compile"],
    )  # fmt: skip
    assert result.exit_code == 9
    assert seen == [({"device": "cpu", "dtype": "auto", "threads": 3, "compile": False}, None)]
    run = cli_options.RunArgs({"max_tokens": 7, "temperature": 0.5, "top_k": 2, "top_p": 0.9,
                               "seed": 1, "chat": None})  # fmt: skip
    sampling = run.sampling()
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_k) == (7, 0.5, 2)
