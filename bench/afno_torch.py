#!/usr/bin/env python3
"""The PyTorch (CPU) peer of bench/afno: the same AFNO (PhysicsNeMo's
physicsnemo.models.afno.AFNO architecture, parameter names and shapes),
trained with MSE loss and Adam, timed per step.

  python3 bench/afno_torch.py --size 256 256 --channels 3 3 --patch 8 \
      --embed 256 --depth 4 --blocks 16 --batch 1 --threads 1 --steps 5 --warmup 2

prints exactly one line:
  torch_step_s=<median seconds> torch_peak_rss_mb=<ru_maxrss in MiB> params=<count>
or, where torch cannot be imported, "SKIP: torch not importable (<reason>)"
and exits 0.

  python3 bench/afno_torch.py --check-ref DIR

compares this model, in float64, with the C reference tests/afno_ref.h on
the files tests/afno_ref_selfcheck.c wrote into DIR (see that file).
"""

import argparse
import os
import resource
import statistics
import sys
import time


def build_classes(torch):
    nn = torch.nn
    F = torch.nn.functional

    class PatchEmbed(nn.Module):
        def __init__(self, inp_shape, cin, patch, dim):
            super().__init__()
            if inp_shape[0] % patch[0] or inp_shape[1] % patch[1]:
                raise ValueError("input shape %s is not divisible by patch %s" % (inp_shape, patch))
            self.proj = nn.Conv2d(cin, dim, kernel_size=patch, stride=patch)

        def forward(self, img):
            return self.proj(img).flatten(2).transpose(1, 2)  # (B, N, D)

    class SpectralFilter(nn.Module):
        """rfft2 (ortho) over the token grid, a block-diagonal complex MLP on
        the kept modes (zero elsewhere), irfft2, plus the filter's input."""

        def __init__(self, dim, nb, sparsity, fraction):
            super().__init__()
            if dim % nb:
                raise ValueError("embed_dim %d is not divisible by num_blocks %d" % (dim, nb))
            bs = dim // nb
            self.nb, self.bs, self.sparsity, self.fraction = nb, bs, sparsity, fraction
            self.w1 = nn.Parameter(0.02 * torch.randn(2, nb, bs, bs))
            self.b1 = nn.Parameter(0.02 * torch.randn(2, nb, bs))
            self.w2 = nn.Parameter(0.02 * torch.randn(2, nb, bs, bs))
            self.b2 = nn.Parameter(0.02 * torch.randn(2, nb, bs))

        def kept_box(self, h, w):
            m = h // 2 + 1
            k = int(m * self.fraction)
            return max(0, m - k), min(h, m + k), max(0, min(k, w // 2 + 1))

        def forward(self, x):  # x (B, h, w, D)
            B, h, w, D = x.shape
            wh = w // 2 + 1
            spec = torch.fft.rfft2(x, dim=(1, 2), norm="ortho").reshape(B, h, wh, self.nb, self.bs)
            r0, r1, c1 = self.kept_box(h, w)
            sel = spec[:, r0:r1, :c1]
            xr, xi = sel.real, sel.imag

            def bmm(a, wgt):  # per block: (..., nb, bs_in) x (nb, bs_in, bs_out)
                return torch.einsum("...ki,kio->...ko", a, wgt)

            h1r = F.relu(bmm(xr, self.w1[0]) - bmm(xi, self.w1[1]) + self.b1[0])
            h1i = F.relu(bmm(xi, self.w1[0]) + bmm(xr, self.w1[1]) + self.b1[1])
            h2r = bmm(h1r, self.w2[0]) - bmm(h1i, self.w2[1]) + self.b2[0]
            h2i = bmm(h1i, self.w2[0]) + bmm(h1r, self.w2[1]) + self.b2[1]
            h2r = F.softshrink(h2r, lambd=self.sparsity)
            h2i = F.softshrink(h2i, lambd=self.sparsity)
            out = torch.zeros(B, h, wh, self.nb, self.bs, dtype=spec.dtype, device=x.device)
            out[:, r0:r1, :c1] = torch.complex(h2r, h2i)
            y = torch.fft.irfft2(out.reshape(B, h, wh, D), s=(h, w), dim=(1, 2), norm="ortho")
            return y + x

    class Mlp(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(hidden, dim)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, dim, nb, mlp_ratio, sparsity, fraction):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.filter = SpectralFilter(dim, nb, sparsity, fraction)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = Mlp(dim, int(dim * mlp_ratio))

        def forward(self, x):
            x = self.filter(self.norm1(x)) + x
            return self.mlp(self.norm2(x)) + x

    class AFNO(nn.Module):
        def __init__(self, inp_shape, cin, cout, patch=(16, 16), dim=256, depth=4, mlp_ratio=4.0, nb=16,
                     sparsity=0.01, fraction=1.0):
            super().__init__()
            self.inp_shape, self.patch, self.cout = tuple(inp_shape), tuple(patch), cout
            self.h, self.w = inp_shape[0] // patch[0], inp_shape[1] // patch[1]
            self.patch_embed = PatchEmbed(inp_shape, cin, patch, dim)
            self.pos_embed = nn.Parameter(torch.zeros(1, self.h * self.w, dim))
            self.blocks = nn.ModuleList([Block(dim, nb, mlp_ratio, sparsity, fraction) for _ in range(depth)])
            self.head = nn.Linear(dim, cout * patch[0] * patch[1], bias=False)
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            for mod in self.modules():  # as the reference: Linear and LayerNorm only
                if isinstance(mod, nn.Linear):
                    nn.init.trunc_normal_(mod.weight, std=0.02)
                    if mod.bias is not None:
                        nn.init.zeros_(mod.bias)
                elif isinstance(mod, nn.LayerNorm):
                    nn.init.ones_(mod.weight)
                    nn.init.zeros_(mod.bias)

        def forward(self, img):
            B = img.shape[0]
            x = self.patch_embed(img) + self.pos_embed
            x = x.reshape(B, self.h, self.w, -1)
            for blk in self.blocks:
                x = blk(x)
            x = self.head(x)  # (B, h, w, p0*p1*cout), channel (i*p1 + j)*cout + c
            p0, p1 = self.patch
            x = x.reshape(B, self.h, self.w, p0, p1, self.cout).permute(0, 5, 1, 3, 2, 4)
            return x.reshape(B, self.cout, self.h * p0, self.w * p1)

    return AFNO


def peak_rss_mib():
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kb / 1024.0


def bench(torch, args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    AFNO = build_classes(torch)
    model = AFNO(args.size, args.channels[0], args.channels[1], args.patch, args.embed, args.depth, args.mlp_ratio,
                 args.blocks, args.sparsity, args.fraction)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    x = torch.randn(args.batch, args.channels[0], args.size[0], args.size[1])
    target = torch.randn(args.batch, args.channels[1], args.size[0], args.size[1])
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
    print("torch_step_s=%.6f torch_peak_rss_mb=%.1f params=%d" % (statistics.median(times), peak_rss_mib(), nparams))


def check_ref(torch, d):
    """Compare with the C reference's dump in d (written by tests/afno_ref_selfcheck.c)."""
    import numpy as np

    torch.set_num_threads(1)
    vals = open(os.path.join(d, "cfg.txt")).read().split()
    H, W, Cin, Cout, p0, p1, D, depth, nb, B = (int(v) for v in vals[:10])
    mlp_ratio, sparsity, fraction = (float(v) for v in vals[10:13])
    AFNO = build_classes(torch)
    model = AFNO((H, W), Cin, Cout, (p0, p1), D, depth, mlp_ratio, nb, sparsity, fraction).double()

    def load(name, shape):
        a = np.fromfile(os.path.join(d, name), dtype="<f8")
        return torch.from_numpy(a.reshape(shape).copy())

    names = [ln.split() for ln in open(os.path.join(d, "params.txt")).read().splitlines() if ln.strip()]
    params = dict(model.named_parameters())
    if len(names) != len(params):
        raise SystemExit("parameter count differs: C %d, torch %d" % (len(names), len(params)))
    with torch.no_grad():
        for idx, (name, *shape) in enumerate(names):
            shape = tuple(int(s) for s in shape)
            if tuple(params[name].shape) != shape:
                raise SystemExit("%s: C shape %s, torch %s" % (name, shape, tuple(params[name].shape)))
            params[name].copy_(load("p%03d.bin" % idx, shape))
    h, w = H // p0, W // p1

    def rel(a, b):
        return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))

    with torch.no_grad():
        img = load("img.bin", (B, Cin, H, W))
        out_c = load("out.bin", (B, Cout, H, W))
        out_t = model(img)
        tok = load("ftok.bin", (B, h, w, D))
        filt_c = load("fout.bin", (B, h, w, D))  # spectral part only: filter(tok) - tok
        f0 = model.blocks[0].filter
        filt_t = f0(tok) - tok
        # how much of the nonlinearity the data exercises, on the kept modes
        spec = torch.fft.rfft2(tok, dim=(1, 2), norm="ortho").reshape(B, h, w // 2 + 1, f0.nb, f0.bs)
        r0, r1, c1 = f0.kept_box(h, w)
        sel = spec[:, r0:r1, :c1]
        bm = lambda a, wg: torch.einsum("...ki,kio->...ko", a, wg)
        pre = bm(sel.real, f0.w1[0]) - bm(sel.imag, f0.w1[1]) + f0.b1[0]
        o1 = torch.relu(pre)
        o1i = torch.relu(bm(sel.imag, f0.w1[0]) + bm(sel.real, f0.w1[1]) + f0.b1[1])
        o2 = bm(o1, f0.w2[0]) - bm(o1i, f0.w2[1]) + f0.b2[0]
        relu_off = float((pre <= 0).double().mean())
        shrunk = float((o2.abs() <= sparsity).double().mean())
    # afno_ref_fd (central differences, step 1e-6) against autograd
    target = load("target.bin", (B, Cout, H, W))
    model.zero_grad()
    torch.nn.functional.mse_loss(model(img), target).backward()
    plist = [params[nm[0]] for nm in names]
    fd = [ln.split() for ln in open(os.path.join(d, "fd.txt")).read().splitlines() if ln.strip()]
    gmax = max(float(plist[int(i)].grad.abs().max()) for i, _, _ in fd)
    e_fd = max(abs(float(v) - float(plist[int(i)].grad.reshape(-1)[int(k)])) for i, k, v in fd) / gmax
    e_out, e_f = rel(out_c, out_t), rel(filt_c, filt_t)
    print("check-ref %dx%d tokens %dx%d D=%d nb=%d depth=%d fraction=%g kept rows [%d,%d) cols [0,%d) of %d: "
          "forward max rel diff %.3e, filter %.3e (relu off %.2f, softshrink zero %.2f); "
          "finite differences vs autograd %.3e of max |grad| (%d elements)"
          % (H, W, h, w, D, nb, depth, fraction, r0, r1, c1, w // 2 + 1, e_out, e_f, relu_off, shrunk, e_fd, len(fd)))
    return 0 if max(e_out, e_f) < 1e-10 and e_fd < 1e-6 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, nargs=2, default=[256, 256], metavar=("H", "W"))
    ap.add_argument("--channels", type=int, nargs=2, default=[3, 3], metavar=("IN", "OUT"))
    ap.add_argument("--patch", type=int, nargs="+", default=[8])
    ap.add_argument("--embed", type=int, default=256)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--mlp-ratio", type=float, default=4.0)
    ap.add_argument("--sparsity", type=float, default=0.01)
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-ref", metavar="DIR", help="compare with the C reference's dump in DIR")
    args = ap.parse_args()
    if len(args.patch) == 1:
        args.patch = args.patch * 2
    if len(args.patch) != 2 or args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("need --patch P or --patch P0 P1, --steps >= 1, --warmup >= 0, --threads >= 1")
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print("SKIP: torch not importable (%s)" % (str(e) or type(e).__name__))
        return 0
    if args.check_ref:
        return check_ref(torch, args.check_ref)
    bench(torch, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
