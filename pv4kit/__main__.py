"""``python -m pv4kit`` runs the command-line interface."""

from pv4kit.cli import main

raise SystemExit(main())
