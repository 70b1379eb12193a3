# The scripts in this folder are third-party training code kept as linter input:
# pytest must never import or collect them.
collect_ignore_glob = ["*.py"]
