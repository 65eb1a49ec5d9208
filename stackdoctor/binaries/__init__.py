"""Files read by their bytes, with caps: ELF and GPU code formats, zips, the loader's cache, and what the dynamic loader would do with torch's libraries."""
