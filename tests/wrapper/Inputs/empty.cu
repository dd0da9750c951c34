// An empty CUDA file, for tests that only look at commands.
