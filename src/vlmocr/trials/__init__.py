"""Trials: short runs whose measurements decide settings — the same sample read under a grid of
settings and scored (grid.py: `vlmocr evaluate --grid`), a corpus's pages read to measure the rate
a plan is made with (rate.py: `vlmocr plan --measure`). They read with the scheduler and judge
with evaluation/ and corpus/, which themselves never start a reading."""
