"""Where wheels come from, below the resolver and the installer: indexes, the user's configured sources, mirrors, range reads, the HTTP client, and what one wheel says (``matrix learn``)."""
