"""vlmocr: documents to verified text with vision-language models, page by page."""

__version__ = "0.1.0"
