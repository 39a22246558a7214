"""The operator sweep behind scripts/torch-ops.py: the command line (cli), the worker processes
(pool, worker), the known failures (known), the matrix (markdown), what is compared how
(settings) and how xhal's results are judged against the CPU's (judge)."""
