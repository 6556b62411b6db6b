"""Allow ``python -m reviewbot``."""

from reviewbot.cli import main

raise SystemExit(main())
