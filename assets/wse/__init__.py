"""Assets of this benchmark; each module exposes build(settings, parts) (see assets/core.py)."""
