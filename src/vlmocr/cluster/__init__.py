"""Running at scale: start an inference server for a profile (`serve`), and SLURM jobs.

Modules here are imported on demand by the CLI (`vlmocr serve`, `vlmocr run --serve`,
`vlmocr slurm …`), so importing the package itself stays cheap and side-effect free."""
