"""`make bench`: the Runtime's performance figures (see bench/README.md). Run with `python -m bench`."""
