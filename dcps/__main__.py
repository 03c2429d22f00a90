"""``python -m dcps``: the ``dcps`` command line."""

from dcps.cli import main

if __name__ == "__main__":
    main()
