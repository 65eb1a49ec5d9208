"""``python3 -m stackdoctor``. From a checkout whose dependencies are not installed, one sentence naming them (exit 2),
never a ModuleNotFoundError traceback."""

import sys
from importlib.util import find_spec

# (module, distribution) the command line needs before it can say anything else
NEEDED = (("typer", "typer"), ("rich", "rich"), ("yaml", "pyyaml"), ("packaging", "packaging"), ("httpx", "httpx"))


def _missing() -> list[str]:
    out = []
    for module, dist in NEEDED:
        try:
            if find_spec(module) is None:
                out.append(dist)
        except (ImportError, ValueError):
            out.append(dist)
    return out


def _say_missing(missing: list[str]) -> None:
    names = ", ".join(missing)
    text = (f"stackdoctor's dependencies {names} are not installed for {sys.executable}; install them (python3 -m pip install .) "
            "or run the one-file stackdoctor.pyz that stackdoctor bundle writes.")
    try:  # the Chinese sentence where the texts can be read (they need pyyaml, or the cache of an earlier run)
        import os

        from stackdoctor.core.texts import detect_lang, sentence

        text = sentence(text, detect_lang(os.environ))
    except Exception:
        pass
    sys.stderr.write(f"stackdoctor: {text}\n")


if __name__ == "__main__":
    gone = _missing()
    if gone:
        _say_missing(gone)
        sys.exit(2)
    from stackdoctor.cli import main

    main()
