"""F.linear on SmolLM2's weight shapes, 1 row against 2-20 rows, on the CPU (ms per call, mean of 50 after one warm-up).
Run: python docs/results/session38_2026-12-05/cpu_linear_rows.py (thirty-eighth session: 2 cores, torch 2.13.0+cpu)."""
import time

import torch

torch.manual_seed(0)
for out_features, in_features in [(576, 576), (192, 576), (1536, 576), (576, 1536), (49152, 576)]:
    weight = torch.randn(out_features, in_features)
    cells = []
    for rows in (1, 2, 4, 8, 20):
        x = torch.randn(rows, in_features)
        torch.nn.functional.linear(x, weight)
        begin = time.perf_counter()
        for _ in range(50):
            torch.nn.functional.linear(x, weight)
        cells.append(f"{rows} rows {(time.perf_counter() - begin) / 50 * 1e3:.3f}")
    print(out_features, in_features, " | ".join(cells))
