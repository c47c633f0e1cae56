"""Where a page's words lie: the engines' boxes gathered into `record.Positions`,
mapped back to the page as the user has it (geometry.py), a VLM's words placed on a CPU
reading's boxes (align.py)."""
