"""Helpers the tests import, one module per job (components, documents, cli, records, runs,
library, chromium, report_runs, serve_standin, slurm); conftest.py files hold only fixtures.
The fake vLLM server, the page codes and the hostile endpoint and files are part of the
package: ``vlmocr.testing``."""
