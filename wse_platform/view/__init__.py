"""`wse view`: read trajectories, episodes and stories with their verdicts in a local web page
(pages.py: queries and HTML; server.py: the 127.0.0.1 read-only server; html.py: building blocks)."""
