"""The entries' snippets run the way a user runs them, and the committed record of those runs."""
