"""The network boundary: HTTP fetching with address safety, content codings, WARC, the browser."""
