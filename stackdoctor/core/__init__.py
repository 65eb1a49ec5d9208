"""The ground every layer stands on: exit codes, version numbers, units, shell words, redaction, texts, the console, and stackdoctor's own cache files; nothing here imports another layer."""
