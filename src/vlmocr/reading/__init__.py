"""The page machine: the task runner every scheduler stands on (pages, figures)."""
