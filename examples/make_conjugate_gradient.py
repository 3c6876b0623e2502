#!/usr/bin/env python3
"""Writes conjugate_gradient.json: CG on a 256 x 256 symmetric positive
definite system, as one graph with a loop.

A is the 5-point Laplacian of a 16 x 16 grid (4 on the diagonal, -1 for each
grid neighbour), b[i] = 1 + (i mod 7) / 7. The loop runs while r.r > tol^2
with tol = 1e-3 (about 1e-4 of |b|). Run it again after changing the system:

    python3 examples/make_conjugate_gradient.py > examples/conjugate_gradient.json
"""

import base64
import json
import struct
import sys

GRID = 16
N = GRID * GRID
TOL = 1e-3


def matrix():
    a = [[0.0] * N for _ in range(N)]
    for row in range(GRID):
        for col in range(GRID):
            i = row * GRID + col
            a[i][i] = 4.0
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                r, c = row + dr, col + dc
                if 0 <= r < GRID and 0 <= c < GRID:
                    a[i][r * GRID + c] = -1.0
    return a


def rhs():
    return [1.0 + (i % 7) / 7.0 for i in range(N)]


def floats(values):
    return base64.b64encode(struct.pack("<%df" % len(values), *values)).decode()


def buf(name, elements, dtype="FLOAT32", **extra):
    size = elements * 4
    b = {"name": name, "sizeBytes": str(size), "dtype": dtype}
    b.update(extra)
    return b


def arg(name, access):
    return {"buffer": {"name": name, "access": access}}


def node(name, op, *args, cost=2):
    return {"name": name, "op": op, "args": list(args),
            "cost": {"estimatedUs": cost}}


def graph():
    flat = [v for row in matrix() for v in row]
    R, W, RW = "READ", "WRITE", "READ_WRITE"
    body = [
        node("Ap", "gemv", {"i32": N}, {"i32": N}, arg("A", R), arg("p", R),
             arg("q", W), cost=20),
        node("pAp", "dot", arg("p", R), arg("q", R), arg("pq", W), cost=4),
        node("alpha", "div", arg("rs", R), arg("pq", R), arg("alpha", W)),
        node("step", "mul", arg("p", R), arg("alpha", R), arg("t", W)),
        node("x_update", "add", arg("x", R), arg("t", R), arg("x", W)),
        node("q_scaled", "mul", arg("q", R), arg("alpha", R), arg("t2", W)),
        node("r_update", "sub", arg("r", R), arg("t2", R), arg("r", W)),
        node("rs_new", "dot", arg("r", R), arg("r", R), arg("rs_next", W),
             cost=4),
        node("beta", "div", arg("rs_next", R), arg("rs", R), arg("beta", W)),
        node("p_scaled", "mul", arg("p", R), arg("beta", R), arg("p", W)),
        node("p_update", "add", arg("r", R), arg("p", R), arg("p", W)),
        node("rs_keep", "copy", arg("rs_next", R), arg("rs", W)),
        node("converged", "greater", arg("rs", R), {"f32": TOL * TOL},
             arg("go", W)),
    ]
    return {
        "name": "conjugate_gradient",
        "buffers": [
            buf("A", N * N, data=floats(flat)),
            buf("b", N, data=floats(rhs())),
            buf("x", N, output=True),
            buf("r", N),
            buf("p", N),
            buf("q", N),
            buf("t", N),
            buf("t2", N),
            buf("rs", 1, output=True),
            buf("rs_next", 1),
            buf("pq", 1),
            buf("alpha", 1),
            buf("beta", 1),
            buf("go", 1, dtype="INT32"),
        ],
        "nodes": [
            node("r0", "copy", arg("b", R), arg("r", W)),
            node("p0", "copy", arg("b", R), arg("p", W)),
            node("rs0", "dot", arg("r", R), arg("r", R), arg("rs", W), cost=4),
            node("go0", "greater", arg("rs", R), {"f32": TOL * TOL},
                 arg("go", W)),
            {"name": "cg", "whileLoop": {"condition": "go", "body": body,
                                         "maxIterations": 500}},
        ],
    }


if __name__ == "__main__":
    json.dump(graph(), sys.stdout, indent=1)
    sys.stdout.write("\n")
