"""Another ML job on the same cores, for bench/busy measurements: a PyTorch float32 matrix
product loop on THREADS threads (default 2) until killed or SECONDS pass.
    cpu_load.py [THREADS] [SECONDS]
Run by bench/busy_machine.sh in bench/.venv-gpt; for figures only."""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else float("inf")
torch.set_num_threads(threads)
a = torch.randn(512, 512)
b = torch.randn(512, 512)
end = time.time() + seconds
while time.time() < end:
    for _ in range(20):
        c = a @ b
