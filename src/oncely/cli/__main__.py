"""``python -m oncely.cli``: the `oncely` command."""

from oncely.cli import main

main(prog_name="oncely")
