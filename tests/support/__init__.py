"""Test support: the fake vLLM server (``openai_server``) and the page code drawn into test pages
(``pagecode``). Kept import-light: importing this package does not start or import the server."""
