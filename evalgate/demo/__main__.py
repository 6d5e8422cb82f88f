"""``python -m evalgate.demo``: ``make demo``."""

from evalgate.demo.main import main

raise SystemExit(main())
