"""The proof: real kernels and collectives run in the target interpreter, and what they did as facts."""
