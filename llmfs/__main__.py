from __future__ import annotations

from llmfs.cli import main

raise SystemExit(main())
