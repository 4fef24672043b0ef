"""``python -m asyncsched`` is the ``asyncsched`` command."""

from asyncsched.cli import main

raise SystemExit(main())
