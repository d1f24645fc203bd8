"""`bench/ui_walkthrough.py` in parts: `common` (constants, environment), `procs` (the demo folder,
the edit, the `wse` commands started and stopped), `graphql` (the webserver's answers polled into a
timeline), `pages` (headless Chromium through the UI and `wse view`), `summary` (what the walk saw)."""
