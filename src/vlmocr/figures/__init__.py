"""Figures: find them in grounded page records and crop them (find), describe them with a VLM
through the page reader (settings, describe), and put the descriptions where the figures sit in
the page text and exports (placement). Import from the module you need: assembling a document
needs placement only, not the describing machinery."""
