"""An entry rendered for readers: the terminal, the Markdown copies and the JSON agents read."""
