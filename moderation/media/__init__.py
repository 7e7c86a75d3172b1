"""Images: bounded decoding, PDQ hashes and hash-bank matching, fetching a client's media_url, and the image invariant."""
