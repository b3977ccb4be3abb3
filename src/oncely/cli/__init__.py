"""The `oncely` command: `main`, the click group (in ``oncely.cli.group``), imported on first use.

The console script enters through `console`. ``oncely lint [PATH]...`` with no option but
``--no-cache``, the run that editors and pre-commit hooks repeat, goes straight to
``oncely.lint.command.run`` with the command's defaults: importing click would be most of a run
whose output is in its manifest. Any other command line, and any usage or configuration error,
goes through `main`.
"""

from __future__ import annotations

import os
import sys

# Not typing's: importing typing is a tenth of a warm run (see oncely.lint.manifest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

    from oncely.cli.group import main


def console() -> NoReturn:
    """The `oncely` console script."""
    arguments = sys.argv[1:]
    if _plain_lint(arguments):
        from oncely.errors import ConfigurationError
        from oncely.lint import command

        paths = [argument for argument in arguments[1:] if argument != _NO_CACHE]
        try:
            sys.exit(command.run(paths, no_cache=len(paths) < len(arguments) - 1))
        except ConfigurationError:
            pass  # main reports it, as a usage error, running the command again
        except KeyboardInterrupt:
            sys.stderr.write("\nAborted!\n")  # as click reports it
            sys.exit(1)
        except BrokenPipeError:
            # As click: a reader that stopped reading (| head) ends the run with status 1,
            # and the output still buffered is dropped instead of failing again at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
    from oncely.cli.group import main

    main()
    sys.exit(0)  # main exits itself; this line is for the type checker


_NO_CACHE = "--no-cache"


def _plain_lint(arguments: list[str]) -> bool:
    """Whether the command line is ``lint`` then ``--no-cache`` (anywhere, any number of times,
    as click takes a flag) and paths click would accept as they are: no other option, no
    ``--``, no other dash, each path existing and readable (click.Path's checks), not on
    Windows (where click expands wildcards) and not asked for shell completion."""
    paths = [argument for argument in arguments[1:] if argument != _NO_CACHE]
    return (
        os.name == "posix"
        and arguments[:1] == ["lint"]
        and not any(argument.startswith("-") for argument in paths)
        and all(os.access(argument, os.R_OK) for argument in paths)
        and not any(key.startswith("_") and key.endswith("_COMPLETE") for key in os.environ)
    )


def __getattr__(name: str) -> object:
    if name == "main":
        from oncely.cli.group import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["console", "main"]
