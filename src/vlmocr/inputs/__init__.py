"""The inputs: what a document is and how its pages become images. sources (files, folders,
manifests, doc ids), render (a page at a size, from PDF, image, TIFF, DjVu or JPEG 2000: djvu,
jpeg2000), master (the image a repository keeps for a page), pixels (what a scan's pixels are:
bit depth, alpha, negatives), skipped (files of a folder that are no documents)."""
