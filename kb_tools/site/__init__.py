"""`kb build` and `kb serve`: the docs site rendered through jinja2 templates into mkdocs."""
