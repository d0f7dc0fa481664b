"""From PyTorch (needs a GPU): CUDA tensors in, a torch.Tensor out, on the stream you pass."""
import torch

import simt_tiles

a = torch.randn(256, 128, device="cuda")
b = torch.randn(128, 64, device="cuda")
stream = torch.cuda.current_stream()
c = simt_tiles.matmul(a, b, stream=stream)
assert isinstance(c, torch.Tensor) and c.device.type == "cuda"
assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-3)

x = torch.randn(8, 3, 32, 32, device="cuda")
w = torch.randn(16, 3, 3, 3, device="cuda")
y = simt_tiles.conv2d_nchw(x, w, padding=1)        # torch.nn.functional.conv2d semantics
assert torch.allclose(y, torch.nn.functional.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-3)
