"""The inputs: what a document is and how its pages become images. sources (files, folders,
manifests, doc ids), preflight (what a file really is before it is opened), render (a page at
a size, from PDF, image, TIFF, DjVu or JPEG 2000: djvu, jpeg2000), pixels (what a scan's
pixels are: bit depth, alpha, negatives), skipped (files of a folder that are no documents)."""
