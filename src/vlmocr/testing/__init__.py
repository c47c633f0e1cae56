"""Tools for testing a pipeline built on vlmocr without a GPU, as vlmocr's own tests and
benchmarks do: real HTTP on 127.0.0.1, real files, faults on purpose.

* ``openai_server``: a fake vLLM (OpenAI-compatible chat completions) with fault injection;
  ``python -m vlmocr.testing.openai_server --port 0`` prints its base URL.
* ``pagecode``: a code drawn into test pages so the fake server can answer per page.
* ``hostile_endpoint``: an endpoint that misbehaves on purpose (endless or oversized bodies,
  wrong types, no answer, refused or echoed keys).
* ``hostile_files``: documents tiny on disk but absurd once opened.
* ``fake_hfjobs``: a stand-in of the Hugging Face Jobs API (``HF_ENDPOINT``) for
  ``vlmocr serve --target hf-jobs``.
* ``fake_hub``: a stand-in Hugging Face Hub (one model repo at pinned commits) for
  ``vlmocr models fetch`` and ``vlmocr slurm fetch`` (``--endpoint hub.url``).

Kept import-light: importing this package starts and imports nothing. ``make_coded_pdf`` needs
reportlab (the ``test`` extra)."""
