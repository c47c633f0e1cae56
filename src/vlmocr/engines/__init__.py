"""Page readers behind one protocol. A new engine is one file plus a line in `registry.py`."""
