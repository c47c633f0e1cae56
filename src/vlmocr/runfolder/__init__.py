"""The run folder, the spine every stage writes to or reads from: record (the page record and
the typed Row it reads back as), store (pages.jsonl: append, CRC-checked, the final record of
each page), rundir (RunDir, the one door to a run folder, and RunInfo, its run.json),
assemble (a document's Markdown from its records), writable (a folder one may write to)."""
