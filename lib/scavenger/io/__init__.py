"""File system access for small files and directory listings, on any URI pyarrow.fs knows (see :mod:`.fs`)."""
